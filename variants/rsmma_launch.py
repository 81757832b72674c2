"""How many rsmma CTAs share an SM: the registers a thread each launch gets, and the fewest its MMA warps
compile with.

An SM has 64K registers and every warp of a CTA starts with the launch's maxnreg (the loader's warp group
then hands its spare ones to the MMA warps), so the count decides how many CTAs fit an SM at once. One
CTA of BN=64 has one MMA warp per scheduler, whose unpack latency nothing else hides; two of them ran
bm128.bn64.bk64.s4 at 4096x11008 M=128 in 27.96 us instead of 43.04 (NOTES.md row 53). The variant's
CTAS parameter asks for that many; the launch gets the registers that let them fit.

Plain Python, so that space.py's rules read it without Gluon; hashed with rsmma.py (tunesearch.search.
FAMILY_SOURCES): the stored trials were timed with the launches these numbers make.
"""
REGISTER_FILE = 65536  # 32-bit registers an SM
LOADER_WARPS = 4  # the loader's one warp, padded to a warp group (warp specialization hands out groups)
MAX_REGISTERS = 232  # the count one CTA launches with when its warps would allow more

# The fewest registers a thread (a multiple of 8) with which ptxas compiles the MMA warps of (BN, BM, BK)
# with no spills and one wgmma left in flight, found offline for sm_90 (tests/test_experiments.py checks
# each, and that 8 fewer fail: "insufficient registers", or every wgmma waited for, C7515).
MMA_REGISTERS = {
    (64, 32, 64): 56, (64, 32, 128): 72, (64, 64, 64): 64, (64, 64, 128): 80, (64, 128, 64): 96,
    (64, 128, 128): 96, (64, 256, 64): 160, (64, 256, 128): 160,
    (128, 32, 64): 64, (128, 32, 128): 88, (128, 64, 64): 72, (128, 64, 128): 96, (128, 128, 64): 96,
    (128, 128, 128): 120, (128, 256, 64): 160, (128, 256, 128): 160,
}


def launch_registers(num_warps: int, ctas: int = 1) -> int:
    """maxnreg for ``ctas`` CTAs an SM, each of ``num_warps`` MMA warps and the loader's warp group."""
    return min(MAX_REGISTERS, REGISTER_FILE // (32 * (num_warps + LOADER_WARPS) * ctas) // 8 * 8)


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
