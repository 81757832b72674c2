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
