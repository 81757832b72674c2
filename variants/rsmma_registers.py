"""Which rsmma tiles may run several CTAs an SM: the fewest registers a thread their MMA warps compile with.

A rule of the search space, like space.py (not hashed with the kernel): the launch's registers come from
rsmma_launch.launch_registers, and this table only says where that count is enough, so a tile measured
later leaves every stored trial naming the kernel it timed.
"""
from .rsmma_launch import launch_registers

# The fewest registers a thread (a multiple of 8) with which ptxas compiles the MMA warps of (BN, BM, BK)
# with no spills and one wgmma left in flight, found offline for sm_90 (tests/test_experiments.py checks
# each, and that 8 fewer fail: "insufficient registers", or every wgmma waited for, C7515).
MMA_REGISTERS = {
    (64, 8, 64): 48, (64, 8, 128): 64, (128, 8, 64): 56, (128, 8, 128): 72,
    (64, 16, 64): 48, (64, 16, 128): 64, (128, 16, 64): 56, (128, 16, 128): 80,
    (64, 32, 64): 56, (64, 32, 128): 72, (64, 64, 64): 64, (64, 64, 128): 80, (64, 128, 64): 96,
    (64, 128, 128): 96, (64, 256, 64): 160, (64, 256, 128): 160,
    (128, 32, 64): 64, (128, 32, 128): 88, (128, 64, 64): 72, (128, 64, 128): 96, (128, 128, 64): 96,
    (128, 128, 128): 120, (128, 256, 64): 168, (128, 256, 128): 160,
}


def registers_error(BN: int, BM: int, BK: int, ctas: int) -> str | None:
    """Why ``ctas`` CTAs of (BN, BM, BK) cannot share an SM's registers; None when they can. A tile not in
    MMA_REGISTERS runs one CTA an SM only (the most registers a launch gives, the count it was tried with)."""
    need = MMA_REGISTERS.get((BN, BM, BK))
    if need is None:
        return None if ctas == 1 else (f"no register count is measured for rsmma's BN={BN}, BM={BM}, BK={BK}: "
                                       f"CTAS must be 1")
    have = launch_registers(BN // 16, ctas)
    if have < need:
        return (f"CTAS={ctas} leaves {have} registers a thread; the MMA warps of BN={BN}, BM={BM}, BK={BK} "
                f"need {need}")
    return None
