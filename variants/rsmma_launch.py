"""How many rsmma CTAs share an SM: the registers a thread each launch gets.

An SM has 64K registers and every warp of a CTA starts with the launch's maxnreg (the loader's warp group
then hands its spare ones to the MMA warps), so the count decides how many CTAs fit an SM at once. One
CTA of BN=64 has one MMA warp per scheduler, whose unpack latency nothing else hides; two of them ran
bm128.bn64.bk64.s4 at 4096x11008 M=128 in 27.96 us instead of 43.04 (NOTES.md row 53). The variant's
CTAS parameter asks for that many; the launch gets the registers that let them fit.

Plain Python, so that space.py's rules read it without Gluon; hashed with rsmma.py (tunesearch.search.
FAMILY_SOURCES): the stored trials were timed with the launches these numbers make. Which tiles may ask
for which count is a rule of the space (rsmma_registers.py), not hashed: a tile measured later leaves
the stored trials valid.
"""
REGISTER_FILE = 65536  # 32-bit registers an SM
LOADER_WARPS = 4  # the loader's one warp, padded to a warp group (warp specialization hands out groups)
MAX_REGISTERS = 232  # the count one CTA launches with when its warps would allow more


def launch_registers(num_warps: int, ctas: int = 1) -> int:
    """maxnreg for ``ctas`` CTAs an SM, each of ``num_warps`` MMA warps and the loader's warp group."""
    return min(MAX_REGISTERS, REGISTER_FILE // (32 * (num_warps + LOADER_WARPS) * ctas) // 8 * 8)


# The fewest registers a thread (a multiple of 8) with which the MMA warps of (BN, BM, BK) compile when they
# scale each block's fp32 partial after its wgmma instead of its fragment before: for 16 and 32 tokens 8
# more than the scaled fragment needs (rsmma_registers.MMA_REGISTERS), for the two partials in flight (16
# more at (128, 32, 128), whose split reduction then reads its partials back through the ring, row 84; the
# split epilogue's addresses are formed where used since row 84, and its former 2-D pointers spilled 8 bytes
# at (64, 32, 64), row 82); for 8 as many but at (128, 8, 128). Found offline for sm_90
# (tests/test_experiments.py checks each, and that 8 fewer fail). Only token tiles of 8 to 32: there a
# partial is 2 to 8 registers and its FFMAs are fewer than the HMUL2s they replace (BM/2 against 32 a
# block). At 8 tokens it beat the scaled fragment at every M <= 8 key timed (NOTES.md row 67: 4096x22016 M=1 18.50 vs 19.96 us, 11008x4096
# M=8 12.30 vs 13.01).
SCALE_AFTER_REGISTERS = {(64, 8, 64): 48, (64, 8, 128): 64, (128, 8, 64): 56, (128, 8, 128): 80,
                         (64, 16, 64): 56, (64, 16, 128): 72, (64, 32, 64): 64, (64, 32, 128): 80,
                         (128, 16, 64): 64, (128, 16, 128): 88, (128, 32, 64): 72, (128, 32, 128): 104}


def scale_after(BN: int, BM: int, BK: int, registers: int) -> bool:
    """Whether a launch of (BN, BM, BK) with ``registers`` a thread scales each block's partial (one FFMA an
    accumulator register) rather than its fragment (one HMUL2 a weight pair): where the tile has the
    registers for it (NOTES.md row 64)."""
    need = SCALE_AFTER_REGISTERS.get((BN, BM, BK))
    return need is not None and registers >= need


def staged_split(BN: int, BK: int, stages: int, split_k: int) -> bool:
    """Whether a launch's split reduction reads the partials back through the drained ring (rsmma's
    STAGED_SPLIT): wherever tiles are split and the ring of ``stages`` A slots [BM, BK] fp16 holds an fp32
    partial [BN, BM]. On the H200 it beat the reads into the accumulator's registers at 7 of 8 M <= 64
    split picks (0.5-4%) and at every 256 x 128 split tile (11-31%; NOTES.md row 84)."""
    return split_k > 1 and stages * BK >= 2 * BN
