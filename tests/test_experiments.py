"""The GPU diagnostics' correct forms must compute A @ W, or their timings mean nothing: each on the
interpreter, with split-K tails shared by several splits and the masking edges."""
import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.experiments import gemv_anatomy, swapab_anatomy  # noqa: E402
from tunesearch.bench import CheckInputs, relative_error  # noqa: E402


@pytest.mark.parametrize("handshake", [1, 2, 3])
def test_gemv_anatomy_tails_compute_a_times_w(handshake, kernel_device):
    M, K, N = 2, 384, 200  # N tail; 6 blocks of 64 in 4 ragged splits
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=handshake)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    gemv_anatomy.anatomy_launcher(*args, out, BN=64, BK=64, SPLIT_K=4, num_warps=2, STAGES=2, COMPUTE=True,
                                  HANDSHAKE=handshake)()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3


@pytest.mark.parametrize("handshake", [1, 2, 3])
def test_swapab_anatomy_tails_compute_a_times_w(handshake, kernel_device):
    M, K, N = 17, 640, 72  # two M tiles, N tail, 5 blocks in 2, 2, 1 and an empty split
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=10 + handshake)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    swapab_anatomy.anatomy_launcher(*args, out, BM=16, BN=64, SPLIT_K=4, num_warps=4, num_stages=3, PLANES=8,
                                    HANDSHAKE=handshake)()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3


def test_the_timing_only_forms_are_wrong_so_they_are_never_shipped(kernel_device):
    # one plane of eight, or no split-K reduction, cannot compute A @ W: the probe's check would say so
    M, K, N = 3, 256, 64
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=5)
    args = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    for planes, handshake in ((1, 1), (8, 0)):
        out = torch.zeros((M, N), dtype=torch.float16, device=kernel_device)
        swapab_anatomy.anatomy_launcher(*args, out, BM=16, BN=64, SPLIT_K=2, num_warps=4, num_stages=3,
                                        PLANES=planes, HANDSHAKE=handshake)()
        assert relative_error(out.cpu(), inputs.ref) > 0.1


def test_layout_k16_repack_is_the_documented_permutation():
    from benchmarks.experiments.layout_k16 import repack_planes, unpack_planes
    from tunesearch.variants.layout import unpack

    inputs = CheckInputs(1, 24, 256, 128, "cpu", seed=7)
    packed_k16 = repack_planes(inputs.packed)
    codes = unpack(inputs.packed)
    # word 16 b + w, nibble j holds row 128 b + 16 j + w
    raw = unpack(packed_k16)
    for b, w, j in ((0, 0, 1), (0, 3, 7), (1, 15, 5), (1, 9, 0)):
        assert torch.equal(raw[8 * (16 * b + w) + j], codes[128 * b + 16 * j + w])
    assert torch.equal(unpack_planes(packed_k16), codes)
    assert not torch.equal(packed_k16, inputs.packed)


@pytest.mark.parametrize("form", [dict(A_DIRECT=True), dict(A_DIRECT=False), dict(A_TMA=True), dict(ASYNC=True)])
@pytest.mark.parametrize("M, BM, split_k", [(3, 16, 1), (17, 16, 3), (40, 64, 2)])
def test_layout_k16_kernel_computes_a_times_w(M, BM, split_k, form, kernel_device):
    from benchmarks.experiments.layout_k16 import planes_launcher, repack_planes

    K, N = 384, 72  # N tail; 3 blocks, split 1, 3 (one each) or 2 (2 + 1)
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=20 + M)
    args = [t.to(kernel_device) for t in (inputs.a, repack_planes(inputs.packed), inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    planes_launcher(*args, out, BM=BM, BN=64, SPLIT_K=split_k, num_warps=4, num_stages=3, **form)()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3
    # the same kernel on the base layout reads the wrong activations: the check can fail
    base = [t.to(kernel_device) for t in (inputs.a, inputs.packed, inputs.scales)]
    planes_launcher(*base, out, BM=BM, BN=64, SPLIT_K=split_k, num_warps=4, num_stages=3, **form)()
    assert relative_error(out.cpu(), inputs.ref) > 0.1


@pytest.mark.parametrize("M, BM, split_k", [(3, 16, 1), (17, 16, 2), (40, 64, 3)])
def test_layout_k32_kernel_computes_a_times_w(M, BM, split_k, kernel_device):
    # planes of 32 k: a 256-block holds two scale groups (planes 0-3 and 4-7)
    from benchmarks.experiments.layout_k16 import planes_launcher, repack_planes, unpack_planes
    from tunesearch.variants.layout import unpack

    K, N = 768, 72  # 3 blocks of 256 in 1, 2 (2 + 1) or 3 splits; N tail
    inputs = CheckInputs(M, N, K, 128, "cpu", seed=40 + M)
    packed_k32 = repack_planes(inputs.packed, plane=32)
    raw, codes = unpack(packed_k32), unpack(inputs.packed)
    for b, w, j in ((0, 0, 4), (1, 31, 3), (2, 17, 7)):  # word 32 b + w, nibble j: row 256 b + 32 j + w
        assert torch.equal(raw[8 * (32 * b + w) + j], codes[256 * b + 32 * j + w])
    assert torch.equal(unpack_planes(packed_k32, plane=32), codes)
    args = [t.to(kernel_device) for t in (inputs.a, packed_k32, inputs.scales)]
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=kernel_device)
    planes_launcher(*args, out, BM=BM, BN=64, SPLIT_K=split_k, num_warps=4, num_stages=3, plane=32)()
    assert relative_error(out.cpu(), inputs.ref) < 2e-3
    # a kernel giving both halves of a block one group's scale would be wrong: swapping each pair of
    # scale rows must change the result
    swapped = inputs.scales.clone().reshape(-1, 2, N).flip(1).reshape(-1, N)
    args[2] = swapped.to(kernel_device)
    planes_launcher(*args, out, BM=BM, BN=64, SPLIT_K=split_k, num_warps=4, num_stages=3, plane=32)()
    assert relative_error(out.cpu(), inputs.ref) > 0.1


def _run_offline(script: str, flag: str, config: str, *more: str) -> subprocess.CompletedProcess:
    """A Gluon experiment's compile for sm_90 (no GPU needed), in a process of its own: the interpreter,
    once it has run in this one, patches the language's operators in place and the compiler can no longer
    lower them."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = Path(__file__).resolve().parents[1]
    return subprocess.run([sys.executable, str(root / "benchmarks/experiments" / script), flag, config, *more],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)


# Compiles started ahead (``_compile_ahead``), as many at once as there are CPUs: each is a process whose
# start (importing torch and triton, ~3 s) is most of a small kernel's compile, and the parametrized tests
# below run dozens of them; one after another they were over a third of CI's time
_ahead: dict[tuple, Future] = {}
_pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)  # its threads start with the first compile
_ahead_for: set = set()  # the test functions whose compiles were started ahead


def _start_offline(*key: str) -> None:
    if key not in _ahead:
        _ahead[key] = _pool.submit(_run_offline, *key)


def _compile_ahead(request, compiles) -> None:
    """Start the compiles of every selected test of ``request``'s test function (this one first, in run
    order), once: ``compiles(**its parameters)`` names each test's (script, flag, config, *more)."""
    if request.function in _ahead_for:
        return
    _ahead_for.add(request.function)
    for item in request.session.items:
        if getattr(item, "function", None) is request.function and hasattr(item, "callspec"):
            for key in compiles(**item.callspec.params):
                _start_offline(*key)


def _compiled_offline(script: str, flag: str, config: str, *more: str) -> dict:
    """The JSON a Gluon experiment prints about its kernel compiled for sm_90 (``_run_offline``), the
    compile started ahead where it was."""
    key = (script, flag, config, *more)
    _start_offline(*key)
    run = _ahead.pop(key).result()
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("config", ["64,128,64,2,4", "128,128,64,1,8", "64,256,64,2,4", "16,64,64,4,4,1"])
def test_gluon_dqmma_compiles_with_one_mma_left_in_flight(config, request):
    # Gluon has no interpreter, so CI cannot run this kernel; it can check that it compiles for sm_90
    # with the schedule it was written for: per K block BK/16 wgmma and one wait for all but one of
    # them (a wait for none would serialize unpack and MMA, the shipped kernels' limit), no spills,
    # and the shared memory the family's validity rule counts (a config it admits must fit).
    _compile_ahead(request, lambda config: [("gluon_dqmma.py", "--schedule", config)])
    got = _compiled_offline("gluon_dqmma.py", "--schedule", config)
    BK = int(config.split(",")[2])
    assert got["waits"] == ["gsb0, 0x1"]
    assert got["wgmma"] == BK // 16
    assert got["async_copies"] > 0  # A and packed W copied asynchronously
    assert got["local"] == 0
    assert got["shared"] == got["buffers"]


@pytest.mark.parametrize("config", ["128,128,64,1,6,3", "64,128,64,2,6,3", "128,128,128,1,4,2", "64,64,128,2,3,2",
                                    "128,256,64,3,4,2,4,1", "128,128,128,0,4,2", "128,256,64,0,4,2,4,1"])
def test_dqmma_compiles_warp_specialized(config, request):
    # The dqmma family's kernel (variants/dqmma.py, through benchmarks/experiments/gluon_ws.py, whose
    # --compile takes the W buffer count too). Gluon has no interpreter, so CI checks that it compiles
    # for sm_90 as written: BK/16 wgmma with one left in flight in the loop and one wait for none, after
    # each tile's segment (SPLIT_K=0, the 4th field, is stream-K; a branch in the loop for the segment's
    # end compiled to a second wait for none on every block, row 49);
    # TMA loads of A, packed W and the scale row (A's 256-byte rows at BK=128 take two boxes of the
    # 128-byte swizzle); register moves between the partitions; no spills; and shared memory within
    # what the family's validity rule counts (its figure + 1024).
    # With MMA_LOADS (the 8th field; the family's BN=256) the MMA warps issue the loads: STAGES blocks
    # in the unrolled prologue, one per block in the loop, and no loader partition.
    _compile_ahead(request, lambda config: [("gluon_ws.py", "--compile", config)])
    got = _compiled_offline("gluon_ws.py", "--compile", config)
    fields = [int(x) for x in config.split(",")]
    BK, stages, mma_loads = fields[2], fields[4], len(fields) > 7 and fields[7]
    assert got["wgmma"] == BK // 16
    assert got["waits"] == ["gsb0, 0x1", "gsb0, 0x0"]
    assert got["tma_loads"] == (3 + (BK > 64)) * (stages + 1 if mma_loads else 1) and got["setmaxreg"] > 0
    assert got["local"] == 0
    assert got["buffers"] <= got["shared"] <= got["buffers"] + 1024


@pytest.mark.parametrize("variant", ["rsmma.bm8.bn64.bk128.sk1.w4.s6.c3", "rsmma.bm16.bn64.bk128.sk2.w4.s6.c3",
                                     "rsmma.bm128.bn128.bk64.sk1.w8.s5", "rsmma.bm64.bn64.bk128.sk1.w4.s4.c2"])
def test_rsmma_on_frag32_unpacks_with_fewer_instructions_and_keeps_its_schedule(variant, request):
    # The family's kernel on frag32 weights (NOTES.md row 69), as its launcher builds it, compiled for sm_90:
    # the same wgmma and waits as on the base layout (one in flight), no spills, the same registers, and the
    # unpack's PRMT (a byte picked from a word a quad loads four times) gone with three of four shared loads.
    _compile_ahead(request, lambda variant: [("frag32.py", "--compile", variant)])
    got = _compiled_offline("frag32.py", "--compile", variant)
    base, frag = got["base"], got["frag32"]
    assert frag["waits"] == base["waits"] and "gsb0, 0x1" in frag["waits"]
    assert frag["wgmma"] == base["wgmma"] and frag["local"] == base["local"] == 0
    assert frag["reg"] == base["reg"]
    blocks = 3  # two a trip and the odd tail
    weight_pairs = blocks * int(variant.split(".bk")[1].split(".")[0]) // 4  # a thread's pairs: BK/4 a block
    assert base["PRMT"] - frag["PRMT"] >= weight_pairs
    assert 3 * frag["LDS"] <= base["LDS"] + 6
    assert frag["instructions"] < base["instructions"]
    # C's tile leaves staged, 8 fp16 a 16-byte load and store, on either layout (row 80; split tiles since
    # row 84, their partials read back through the ring too), a thread's [1, 8] rows passing over 16 of the
    # tile's (BN/8 lanes a row, BN = 16 a warp; bm8 stores twice)
    from tunesearch.variants import Variant

    p = Variant.from_id(variant).params
    staged = -(-p["BM"] // 16)
    assert base["staged_loads"] == frag["staged_loads"] == base["staged_stores"] == frag["staged_stores"] == staged
    assert (base["readback_loads"] > 0) == (frag["readback_loads"] > 0) == (p["SPLIT_K"] > 1)


@pytest.mark.parametrize("config", ["128,128,2,5", "64,128,2,6", "256,64,1,6", "16,128,2,8,4"])
def test_dqmma_rs_keeps_one_wgmma_in_flight_with_registers_as_a(config, request):
    # The swapped-operand experiment compiles for sm_90 as written: every wgmma takes W^T from registers
    # (no fp16 weight in shared memory), BK/16 of them per block in each of the loop's three copies (two
    # blocks a trip and the odd tail), each followed by a wait that leaves one in flight (with one register
    # set for every block ptxas serialized them: C7515, a wait for none after each), no spills, and
    # shared memory within the SM's 227 KB.
    _compile_ahead(request, lambda config: [("dqmma_rs.py", "--compile", config)])
    got = _compiled_offline("dqmma_rs.py", "--compile", config)
    BK = int(config.split(",")[1])
    assert got["wgmma"] == 3 * BK // 16 and got["register_a"] == got["wgmma"]
    assert got["waits"] == ["gsb0, 0x1"] * 3 + ["gsb0, 0x0"]
    assert got["local"] == 0 and got["shared"] <= 232448


@pytest.mark.parametrize("variant", ["rsmma.bm128.bn128.bk64.sk1.w8.s8", "rsmma.bm128.bn128.bk128.sk2.w8.s5",
                                     "rsmma.bm256.bn128.bk128.sk1.w8.s2", "rsmma.bm256.bn64.bk128.sk1.w4.s3",
                                     "rsmma.bm64.bn64.bk64.sk4.w4.s8", "rsmma.bm16.bn64.bk128.sk2.w4.s4.c4",
                                     "rsmma.bm16.bn64.bk128.sk2.w4.s6.c3", "rsmma.bm32.bn64.bk128.sk2.w4.s4.c3",
                                     "rsmma.bm16.bn64.bk128.sk0.w4.s6.c3", "rsmma.bm128.bn64.bk64.sk0.w4.s4.c2",
                                     "rsmma.bm8.bn64.bk128.sk2.w4.s6.c2", "rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4",
                                     "rsmma.bm16.bn64.bk128.sk4.w4.s8.c3.skew2"])
def test_rsmma_compiles_with_registers_as_a_and_paired_loads(variant, request):
    # The rsmma family's kernel (variants/rsmma.py) as its launcher builds it, compiled for sm_90 (CI has no
    # GPU; Gluon no interpreter): every wgmma takes W^T from registers, BK/16 a block in each of the loop's
    # three copies (two blocks a trip and the odd tail), each followed by a wait that leaves one in flight
    # and one wait for none at the end of each tile segment (stream-K's too: sk0, its loop per segment;
    # skewed splits' too, whose first split reads the counter before its own partial's store); the
    # packed words read 8 bytes a load (a thread's two columns
    # adjacent: BK/32 chunks x 4 words a block, 3 blocks); no spills even at the widest tiles (BM=256 with
    # BK=128 at 8 and at 4 warps, which the family admits with no register rule); and shared memory
    # within what the family's validity rule counts (its figure + 1024).
    from tunesearch.variants import Variant
    from tunesearch.variants.space import rsmma_shared_bytes

    # Token tiles of 8 to 32 with the registers for it scale each block's fp32 partial (no HMUL2), and wait
    # for the last partial on either branch of the odd tail: one wait for none more.
    from tunesearch.variants.rsmma_launch import launch_registers, scale_after

    _compile_ahead(request, lambda variant: [("dqmma_rs.py", "--compile-family", variant)])
    got = _compiled_offline("dqmma_rs.py", "--compile-family", variant)
    p = Variant.from_id(variant).params
    after = scale_after(p["BN"], p["BM"], p["BK"], launch_registers(p["num_warps"], p["CTAS"]))
    assert after == (p["BM"] == 8 or p["BM"] <= 32 and p["CTAS"] == 3)  # the parameters above: both forms
    assert got["wgmma"] == 3 * p["BK"] // 16 and got["register_a"] == got["wgmma"]
    assert got["waits"] == ["gsb0, 0x1"] * 3 + ["gsb0, 0x0"] * (2 if after else 1)
    assert (got["fp16_multiplies"] == 0) == after
    assert got["shared_loads"].get("LDS.64", 0) == 3 * (p["BK"] // 32) * 4
    # A's 256-byte rows at BK=128 take two boxes, one a 128-byte column chunk, and below a token tile's rows
    # (M=128 here, on bm256) one box a chunk of M's rows: 128 is a power of two, so no second box of A's
    # last rows (rsmma.a_tail)
    assert got["tma_loads"] == 2 + p["BK"] // 64
    assert got["local"] == 0
    bytes_ = rsmma_shared_bytes(p["BM"], p["BN"], p["BK"], p["num_stages"])
    assert bytes_ <= got["shared"] <= bytes_ + 1024


def test_layout_ring_probe_streams_what_the_familys_ring_streams():
    # layout_ring.py's bare ring (NOTES.md row 66) is compared with the family's ring form, so it must move
    # the same boxes a stage: A's tile (two boxes: 256-byte rows at BK=128) and the packed block, then the
    # scale row (SCALES=1) or the CTA's scale rows in one box before the loop (SCALES=2), on the base layout
    # and the column-panel copy alike, with no spills at the family's 80 registers for 3 CTAs an SM.
    # Its split-reduction epilogue (the family's, "11") counts with atomics, the ring alone with none; the
    # sliced-K form ("11s": two warp groups a CTA, one CTA a tile where the family has two) streams the same
    # boxes and sums its slices through shared memory, with no atomics.
    got = _compiled_offline("layout_ring.py", "--compile", "")
    for layout in ("base", "panel"):
        assert [got[layout][form]["tma_loads"] for form in ("00", "10", "20", "11", "11s")] == [3, 4, 4, 4, 4]
        assert all(form["local"] == 0 for form in got[layout].values())
        assert got[layout]["00"]["atomics"] == 0 and got[layout]["11"]["atomics"] > 0
        assert got[layout]["11s"]["atomics"] == 0
        assert got[layout]["11s"]["shared_stores"] > got[layout]["11"]["shared_stores"]
    # The frag32 form (the table's layout, NOTES.md row 103) moves a block's A tile in 128-byte rows' boxes
    # (one at BK=64, two at 128, four at 256), its packed rows in one box and its scale rows (one, or two at
    # BK=256) in another; without A's tile only the last two. Each keeps the family's split reduction.
    # At M=1 (bm8_row1, one split) A's row alone goes in one 128-byte box per column chunk of the slot.
    frag = got["frag"]
    assert {form: frag[form]["tma_loads"] for form in frag} == dict(bk64=3, bk128=4, bk256=6, bk64_noa=2,
                                                                     bk128_noa=2, bk256_noa=2, bm8_row1=4)
    assert all(form["local"] == 0 for form in frag.values())
    assert all(frag[form]["atomics"] > 0 for form in frag if form != "bm8_row1")


def test_rsmma_sliced_streams_two_rings_and_reduces_across_ctas_only_where_a_split_is_left():
    # rsmma_sliced.py (NOTES.md row 68): one loader warp fills two rings (a block's A tile in two boxes, its
    # packed block and its scale row: 8 TMA loads in the loop), two copies of the family's MMA partition
    # read them, no spills at 80 registers (two CTAs of 12 warps an SM), each block's partial scaled after
    # its wgmma. Where the pick split K two ways no split is left (no atomics: the slices meet in shared
    # memory); where it split four ways the family's reduction remains over two CTAs.
    # Its diagonal form (one 8-warp MMA partition, A's blocks of both K halves as one token tile of 2 BM)
    # loads two of each box a block (A's two tiles, two packed boxes, two scale rows at BK=64: 6) and keeps
    # one wgmma in flight at 80 registers for token tiles of 8 to 32, so its timing is of the form itself.
    got = _compiled_offline("rsmma_sliced.py", "--compile", "")
    two, four = got["sliced"]["rsmma.bm16.bn64.bk128.sk2.w4.s5.c3"], got["sliced"]["rsmma.bm8.bn64.bk128.sk4.w4.s6.c3"]
    for launch in (two, four):
        assert launch["tma_loads"] == 8 and launch["local"] == 0 and launch["reg"] <= 80 and launch["scale_after"]
    assert two["atomics"] == 0 and four["atomics"] > 0
    for variant, launch in got["diag"].items():
        assert launch["tma_loads"] == 6 and launch["local"] == 0 and launch["reg"] <= 80, variant
        assert launch["waits"][:3] == ["gsb0, 0x1"] * 3 and set(launch["waits"][3:]) == {"gsb0, 0x0"}, variant
        assert (launch["atomics"] > 0) == (".sk4." in variant), variant


def test_sliced_mma_v2_multiplies_with_mma_sync_and_reduces_across_ctas_only_where_a_split_is_left():
    # sliced_mma_v2.py (NOTES.md row 111): each slice multiplies with mma.sync (HMMA.16816, no wgmma), one
    # loader warp fills its ring (A's tile, the packed block, the scale row: 4 TMA loads a ring), no spills
    # at 80 registers. Two slices a CTA halve the CTAs along K: at a pick split two ways no split is left
    # (no atomics, the slices meet in shared memory); at four ways the family's reduction remains.
    got = _compiled_offline("sliced_mma_v2.py", "--compile", "")
    for name, launch in got.items():
        slices = launch["slices"]
        assert launch["wgmma"] == 0 and launch["hmma"] > 0, name
        assert launch["tma_loads"] == 4 * slices and launch["local"] == 0 and launch["reg"] <= 80, name
    assert got["rsmma.bm8.bn64.bk128.sk2.w4.s6.c3 slices=2"]["atomics"] == 0
    for name in ("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3 slices=1", "rsmma.bm16.bn64.bk128.sk4.w4.s8.c3 slices=1",
                 "rsmma.bm16.bn64.bk128.sk4.w4.s8.c3 slices=2"):
        assert got[name]["atomics"] > 0, name


@pytest.mark.parametrize("variant, layout", [("rsmma.bm128.bn64.bk128.sk1.w4.s3.c2", "base"),
                                             ("rsmma.bm256.bn64.bk64.sk1.w4.s5", "base"),
                                             ("rsmma.bm32.bn64.bk128.sk1.w4.s8", "frag32")])
def test_rsmma_anatomy_mma_only_form_keeps_the_schedule_and_reads_no_weights(variant, layout, request):
    # rsmma_anatomy.py's MMA-only form (the family's kernel with a constant fragment) must time the same
    # skeleton: as many wgmma, one left in flight, no spills; and it must not read the packed words (the
    # full form's 8-byte shared loads), or it would not be what it claims to leave out. On frag32 too, the
    # layout every llama shape keeps: its packed tile is [BN/64 x BK/32, 256], from which the form once
    # took BN and BK as the base layout's [BK/8, BN] and failed to compile (NOTES.md row 100).
    _compile_ahead(request, lambda variant, layout: [("dqmma_rs.py", "--compile-family", variant, layout),
                                                            ("rsmma_anatomy.py", "--compile", variant, layout)])
    full = _compiled_offline("dqmma_rs.py", "--compile-family", variant, layout)
    mma_only = _compiled_offline("rsmma_anatomy.py", "--compile", variant, layout)
    assert mma_only["wgmma"] == full["wgmma"] and mma_only["waits"] == full["waits"]
    # one wgmma in flight in the loop, then waits for all (one such wait at bm128 and bm256, two at bm32)
    assert mma_only["waits"][:3] == ["gsb0, 0x1"] * 3 and set(mma_only["waits"][3:]) == {"gsb0, 0x0"}
    assert mma_only["local"] == 0
    assert full["shared_loads"]["LDS.64"] > 0 and mma_only["shared_loads"] < sum(full["shared_loads"].values())
    assert mma_only["shared_loads"] <= 4  # the scale rows' loads only
    from tunesearch.variants import Variant

    bm = Variant.from_id(variant).params["BM"]
    assert mma_only["staged_loads"] == bm // 16  # one split: C's tile read back staged, 16 of its rows a pass


@pytest.mark.parametrize("variant", ["rsmma.bm32.bn64.bk128.sk2.w4.s6.c3.skew4", "rsmma.bm8.bn64.bk128.sk4.w4.s8.c4"])
def test_rsmma_cluster_experiment_keeps_the_familys_schedule_and_shared_memory(variant, request):
    # rsmma_cluster.py's reduction through a cluster (NOTES.md row 89) must time the family's loop: the
    # same waits (one wgmma in flight), the same shared allocation (its mbarriers lie past it, at REGION),
    # no spills; and a partial must fit the first ring buffer, where the other ranks leave theirs
    _compile_ahead(request, lambda variant: [("dqmma_rs.py", "--compile-family", variant),
                                                  ("rsmma_cluster.py", "--compile", variant)])
    full = _compiled_offline("dqmma_rs.py", "--compile-family", variant)
    cluster = _compiled_offline("rsmma_cluster.py", "--compile", variant)
    assert cluster["waits"] == full["waits"] and cluster["shared"] == full["shared"] and cluster["local"] == 0
    from tunesearch.variants import Variant

    p = Variant.from_id(variant).params
    assert cluster["first_buffer"] >= p["BN"] * p["BM"] * 4


@pytest.mark.parametrize("variant", ["rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4", "rsmma.bm8.bn64.bk128.sk4.w4.s5.c3"])
def test_rsmma_prefetch_keeps_the_familys_schedule_beside_its_partials_buffer(variant, request):
    # rsmma_prefetch.py (NOTES.md row 132) must time the family's loop: the same wgmma waits (two inlined
    # staged stores made ptxas serialize every wgmma, C7514), registers and no spills; its shared memory is
    # the family's plus the other parts' slots (a power of two of them), a flag and an mbarrier
    _compile_ahead(request, lambda variant: [("rsmma_prefetch.py", flag, variant)
                                                  for flag in ("--compile-family", "--compile", "--compile-ring")])
    family = _compiled_offline("rsmma_prefetch.py", "--compile-family", variant)
    prefetch = _compiled_offline("rsmma_prefetch.py", "--compile", variant)
    assert prefetch["waits"] == family["waits"] and "gsb0, 0x1" in family["waits"]
    assert prefetch["reg"] == family["reg"] and prefetch["local"] == family["local"] == 0
    from tunesearch.variants import Variant

    p = Variant.from_id(variant).params
    slots = 1 << (p["SPLIT_K"] - 2).bit_length()
    buffer = slots * 16 * p["num_warps"] * p["BM"] * 4
    assert family["shared"] + buffer < prefetch["shared"] <= family["shared"] + buffer + 1024
    # with the partials in the ring's freed A stages, only the flag and the mbarrier are added
    ring = _compiled_offline("rsmma_prefetch.py", "--compile-ring", variant)
    assert ring["waits"] == family["waits"] and ring["reg"] == family["reg"] and ring["local"] == 0
    assert family["shared"] < ring["shared"] <= family["shared"] + 256


def _rsmmapf_forms(twin: str) -> list:
    """The rsmmapf forms of an rsmma variant the family offers: the partials in the ring's freed A stages
    (RING=1) where BK is twice BN, and in a buffer of their own."""
    from tunesearch.variants import Variant

    p = Variant.from_id(twin).params
    return [Variant("rsmmapf", {**p, "RING": ring}) for ring in ((1, 0) if p["BK"] == 2 * p["BN"] else (0,))]


@pytest.mark.parametrize("twin", ["rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4", "rsmma.bm8.bn64.bk128.sk4.w4.s5.c3",
                                  "rsmma.bm16.bn128.bk64.sk2.w8.s8", "rsmma.bm64.bn64.bk128.sk4.w4.s4.c2"])
def test_rsmmapf_as_launched_keeps_its_rsmma_twins_schedule_and_the_shared_bytes_its_rule_counts(twin, request):
    # the rsmmapf family (variants/rsmmapf.py) as api._kernel_call launches it: rsmma's loop (the same wgmma
    # waits and registers, no spills), and the shared memory space.rsmmapf_extra_bytes adds to rsmma's, which
    # decides where the family's CTAs fit (space._rsmmapf_error, _ctas_pruned), in each form it offers
    from tunesearch.variants import Variant
    from tunesearch.variants.space import DeviceLimits, rsmma_shared_bytes, rsmmapf_extra_bytes, variant_error

    _compile_ahead(request, lambda twin: [("rsmma_prefetch.py", "--compile-variant", vid)
                                               for vid in (twin, *(pf.id for pf in _rsmmapf_forms(twin)))])
    family = _compiled_offline("rsmma_prefetch.py", "--compile-variant", twin)
    p = Variant.from_id(twin).params
    for pf in _rsmmapf_forms(twin):
        ring = pf.params["RING"]
        assert variant_error(pf, 1, 4096, 4096, 128, DeviceLimits(gluon=True), layout="frag32") is None
        got = _compiled_offline("rsmma_prefetch.py", "--compile-variant", pf.id)
        assert got["waits"] == family["waits"] and "gsb0, 0x1" in got["waits"]
        assert got["reg"] == family["reg"] and got["local"] == family["local"] == 0
        extra = rsmmapf_extra_bytes(p["BM"], p["BN"], p["SPLIT_K"], ring)
        assert 0 <= got["shared"] - family["shared"] - extra <= 64, (pf.id, got["shared"], family["shared"], extra)
        counted = rsmma_shared_bytes(p["BM"], p["BN"], p["BK"], p["num_stages"]) + extra
        assert counted < got["shared"] <= counted + 1024  # the rule's alignment allowance (space._tma_ring_error)


def _twotile_configs():
    """The experiment's config ("BN,HI,LO,BK,STAGES,CTAS,STREAM") for each (HI, BN) of the twotile family at
    the most CTAs an SM its rule allows (space.TWOTILE_CTAS), the widest LO, both schedules; and the
    shallowest and deepest rings of the family's grid at the widest tile."""
    from tunesearch.variants.space import TWOTILE_CTAS

    configs = [f"{bn},{hi},{hi // 2},64,4,{ctas},{stream}" for (hi, bn), ctas in sorted(TWOTILE_CTAS.items())
               for stream in (0, 1)]
    return configs + ["64,128,64,64,3,2,1", "64,128,64,64,6,1,0", "64,64,32,64,5,2,1"]


@pytest.mark.parametrize("config", _twotile_configs())
def test_two_token_tiles_on_one_fragment_keep_both_wgmmas_in_flight(config, request):
    # The twotile family's kernel (variants/twotile.py, a HI + LO token tile as two accumulators on one
    # unpacked fragment, for M = 129..192 and 65..96, compiled through rsmma_two_tiles.py) must run as it
    # means to: each block's two wgmmas issued before the previous block's two are waited for (2 left in
    # flight; a wait for 0 or 1 would serialize the chain it is meant to halve), no spills at the registers
    # of the CTAs an SM its rule allows (space.TWOTILE_CTAS), and their shared memory within the SM's
    # 228 KB and within what the rule counts (space.rsmma_shared_bytes of HI + LO rows, + 1024).
    # Config: BN,HI,LO,BK,STAGES,CTAS,STREAM. One CTA a tile, and stream-K.
    from tunesearch.variants.space import rsmma_shared_bytes

    _compile_ahead(request, lambda config: [("rsmma_two_tiles.py", "--compile", config)])
    got = _compiled_offline("rsmma_two_tiles.py", "--compile", config)
    assert got["waits"][:-1] == ["gsb0, 0x2"] * (len(got["waits"]) - 1) and got["waits"][-1] == "gsb0, 0x0", got
    assert got["local"] == 0, got
    bn, hi, lo, bk, stages, ctas, _ = (int(x) for x in config.split(","))
    assert ctas * (got["shared"] + 1024) <= 228 * 1024, got
    assert got["shared"] <= rsmma_shared_bytes(hi + lo, bn, bk, stages) + 1024, got


@pytest.mark.parametrize("config", ["64,128,32,16,64,4,2", "128,128,32,16,64,4,1"])
def test_three_token_tiles_on_one_fragment_keep_all_three_wgmmas_in_flight(config, request):
    # rsmma_three_tiles.py (M = 161..176 as 128 + 32 + 16 tokens, NOTES.md row 101): each block's three
    # wgmmas issued before the previous block's three are waited for (3 left in flight; fewer would
    # serialize the chain the shared fragment is meant to spare), no spills at the registers of its CTAs an
    # SM, and their shared memory within the SM's 228 KB. Config: BN,HI,MID,LO,BK,STAGES,CTAS.
    _compile_ahead(request, lambda config: [("rsmma_three_tiles.py", "--compile", config)])
    got = _compiled_offline("rsmma_three_tiles.py", "--compile", config)
    assert got["waits"][:-1] == ["gsb0, 0x3"] * (len(got["waits"]) - 1) and got["waits"][-1] == "gsb0, 0x0", got
    assert got["local"] == 0, got
    ctas = int(config.split(",")[-1])
    assert ctas * (got["shared"] + 1024) <= 228 * 1024, got



@pytest.mark.parametrize("config", ["128,64,4", "64,64,8"])
def test_a_192_column_tile_keeps_both_slabs_wgmmas_in_flight(config, request):
    # rsmma_slabs.py (NOTES.md row 114): a block's two wgmmas ([128, BM] on the warp groups' own columns,
    # [64, BM] with the groups side by side along the tokens) issued before the block before's are waited
    # for, no spills, within one CTA's shared memory. Three MMA partitions of one warp group each, the
    # plain form, serialized every wgmma (C7514); so does BK=128 here. Config: BM,BK,STAGES.
    _compile_ahead(request, lambda config: [("rsmma_slabs.py", "--compile", config)])
    got = _compiled_offline("rsmma_slabs.py", "--compile", config)
    assert got["waits"][:-1] == ["gsb0, 0x2"] * (len(got["waits"]) - 1) and got["waits"][-1] == "gsb0, 0x0", got
    assert got["local"] == 0, got
    assert got["shared"] + 1024 <= 228 * 1024, got


@pytest.mark.parametrize("config", ["16,8,128,8", "32,16,128,8"])
def test_narrow_mma_sync_tiles_compile_without_spills_or_wgmma(config, request):
    # narrow_v2.py (NOTES.md row 115): 16 or 32 columns a CTA on mma.sync over all of K, no split: no
    # wgmma to wait for, nothing spilled, and the ring within the shared memory of several CTAs an SM.
    # Config: BN,BM,BK,STAGES.
    _compile_ahead(request, lambda config: [("narrow_v2.py", "--compile", config)])
    got = _compiled_offline("narrow_v2.py", "--compile", config)
    assert got["waits"] == [] and got["local"] == 0, got
    assert 4 * (got["shared"] + 1024) <= 228 * 1024, got


@pytest.mark.parametrize("config", ["32,128,4,2", "16,128,6,2"])
def test_a_wave_of_whole_tiles_and_the_rest_stream_k_keeps_one_wgmma_in_flight(config, request):
    # rsmma_hybrid.py (NOTES.md row 118): both of the MMA warps' loops (the whole tiles', the split units')
    # leave one wgmma in flight (waits of 1, each loop's last of 0), nothing spilled, and two CTAs' rings fit
    # an SM. Config: BM,BK,STAGES,CTAS.
    _compile_ahead(request, lambda config: [("rsmma_hybrid.py", "--compile", config)])
    got = _compiled_offline("rsmma_hybrid.py", "--compile", config)
    assert got["waits"].count("gsb0, 0x1") >= 6 and set(got["waits"]) == {"gsb0, 0x1", "gsb0, 0x0"}, got
    assert got["local"] == 0, got
    assert 2 * (got["shared"] + 1024) <= 228 * 1024, got


def _fewest_registers_compile(flag: str, tile, need: int) -> tuple[str, str, str]:
    """dqmma_rs.py's compile of ``tile`` (BN, BM, BK) with one split and with two, each at ``need`` registers
    a thread and at 8 fewer."""
    bn, bm, bk = tile
    one, two = (f"rsmma.bm{bm}.bn{bn}.bk{bk}.sk{split}.w{bn // 16}.s3" for split in (1, 2))
    return "dqmma_rs.py", flag, f"{one}@{need},{need - 8},{two}@{need},{need - 8}"


def _assert_fewest_registers_that_fit(flag: str, tile, need: int):
    """The rsmma kernel of ``tile`` (BN, BM, BK), in the form ``flag`` of dqmma_rs.py, fits at ``need``
    registers a thread (no spills, one wgmma in flight) and not at 8 fewer: with one split (the MMA warps'
    loop and the staged epilogue) and with two (the split reduction's epilogue, whose addresses are formed
    where they are used: a pointer a value held across its atomic spilled at 128 and 256 tokens, NOTES.md
    row 82)."""
    one_at, one_below, two_at, two_below = _compiled_offline(*_fewest_registers_compile(flag, tile, need))
    assert one_at["fits"] and one_at["reg"] <= need, one_at
    assert two_at["fits"], two_at
    assert not (one_below["fits"] and two_below["fits"]), (one_below, two_below)


@pytest.mark.parametrize("tile", sorted(__import__("tunesearch.variants.rsmma_registers", fromlist=["x"]).MMA_REGISTERS))
def test_rsmma_register_table_is_the_fewest_that_fit(tile, request):
    # rsmma_registers.MMA_REGISTERS decides which CTAS a tile may ask for (the launch's registers shrink with
    # it). Each entry must compile for sm_90 with no spills and one wgmma in flight, and 8 registers fewer
    # must not: a table too low would launch spilling or serialized kernels, one too high would forbid
    # occupancy that works.
    from tunesearch.variants.rsmma_registers import MMA_REGISTERS

    _compile_ahead(request, lambda tile: [_fewest_registers_compile("--registers", tile, MMA_REGISTERS[tile])])
    _assert_fewest_registers_that_fit("--registers", tile, MMA_REGISTERS[tile])


@pytest.mark.parametrize("tile", sorted(__import__("tunesearch.variants.rsmma_launch", fromlist=["x"]).SCALE_AFTER_REGISTERS))
def test_rsmma_scale_after_register_table_is_the_fewest_that_fit(tile, request):
    # rsmma_launch.SCALE_AFTER_REGISTERS decides which launches scale each block's partial after its wgmma
    # (two partials more in registers). Each entry must compile that form with no spills and one wgmma in
    # flight, and 8 registers fewer must not: a launch below the count keeps the scaled fragment, which
    # fits from the MMA_REGISTERS entry (checked above) up, so that entry must not be above this one (at 8
    # tokens the two are often equal: no launch then runs the scaled fragment)
    from tunesearch.variants.rsmma_launch import SCALE_AFTER_REGISTERS
    from tunesearch.variants.rsmma_registers import MMA_REGISTERS

    need = SCALE_AFTER_REGISTERS[tile]
    _compile_ahead(request, lambda tile: [_fewest_registers_compile("--registers-scale-after", tile,
                                                                    SCALE_AFTER_REGISTERS[tile])])
    _assert_fewest_registers_that_fit("--registers-scale-after", tile, need)
    assert MMA_REGISTERS[tile] <= need


def test_split_rule_ab_reproduces_the_earlier_split_rules(monkeypatch):
    # benchmarks/experiments/split_rule_ab.py benches M under an earlier split rule beside this tree's
    # (NOTES.md rows 96-97): each rule must decide as it did. Buckets 16 (5 us) and 32 (30 us at M=32,
    # 10.25 at its edge M=17), gemm picks, whose token tiles say nothing: M=20 as 16 + 4 takes 10 us
    from benchmarks.experiments import split_rule_ab
    from tunesearch import export
    from tunesearch.dispatch import _ShapeTable
    from tunesearch.variants import Variant

    def bucket(m, vid, us, edge=None):
        return {"m_max": m, "variant": Variant.from_id(vid).to_dict(), "us": us,
                **({"edge": {"m": edge[0], "us": edge[1]}} if edge else {})}

    gemv, gemm = "gemv.bm1.bn64.bk64.sk2.w4.s1", "gemm.bm64.bn64.bk64.g1.w4.s2"
    shape = _ShapeTable([bucket(1, gemv, 3.0), bucket(16, gemm, 5.0), bucket(17, gemm, 10.25),
                         bucket(32, gemm, 30.0, (17, 10.25))], 64, "t")
    decided = {}
    for rule, (gain, whole) in split_rule_ab.RULES.items():
        monkeypatch.setattr(export, "SPLIT_GAIN", gain)
        monkeypatch.setattr(_ShapeTable, "whole_us", whole)
        decided[rule] = [shape.launches(m) for m in (17, 20, 32)]
    monkeypatch.undo()
    # M=17 (5 + 3 = 8 us against 10.25) splits under both; at M=20 and 32, 16 + the rest take 10 us: s47
    # weighs them against 0.95 * 10.25 = 9.74 (whole), s48a against 0.98 * 10.25 = 10.045 at M=20 and the
    # bucket's own 30 us at M=32 (split)
    assert decided == {"s47": [(16, 1), (20,), (32,)], "s48a": [(16, 1), (16, 4), (16, 16)]}
    # this tree's rule, where the tiles say nothing (gemm picks), decides as s48a
    assert [shape.launches(m) for m in (17, 20, 32)] == [(16, 1), (16, 4), (16, 16)]


def test_rsmma_row_box_loads_only_as_rows_with_the_familys_schedule():
    # rsmma_row_box.py (NOTES.md row 104): at M < 8 the family's kernel takes A's rows in boxes of R < 8
    # rows per 128-byte column chunk of the slot (two chunks at BK=128; the family's 8-row box is two TMA
    # copies too, one per chunk), each chunk's first box with a second one of A's last R rows (predicated:
    # issued where M > R), with the family's wgmmas, waits and registers, and no spills; the packed weights
    # and the scales are one copy each.
    got = _compiled_offline("rsmma_row_box.py", "--compile", "")
    a_copies = {"rows8": 1, "rows1": 2, "rows2": 2, "rows4": 2, "two_box2": 2, "two_box4": 2}
    assert set(got) == set(a_copies)
    for name, per_chunk in a_copies.items():
        form = got[name]
        assert form["tma_loads"] == 2 * per_chunk + 2, name
        assert form["wgmma"] == got["rows8"]["wgmma"] and form["waits"] == got["rows8"]["waits"], name
        assert form["local"] == 0 and form["reg"] <= 80, name


def test_rsmmas_loader_compiles_a_second_box_of_a_only_where_the_launch_needs_it():
    # rsmma's loader (NOTES.md rows 108-109): below a token tile A's box of M's last power of two R, and a
    # second of A's last rows only where M > R, a constexpr (A_TAIL): at M=1 the tree compiles as the
    # one-box loader of _s53-_s56 (two TMA copies of A a stage, one a 128-byte column chunk at BK=128), at
    # M=3 with the second box (two more), and two_box's first form (c8a9bfa) with the two predicated
    # copies at M=1 too, which cost M=1, 2, 4 1-3% (loader_ab.py). Each keeps the family's wgmmas, waits
    # and registers, with no spills.
    forms = (("tree", "1"), ("tree", "3"), ("predicated", "1"), ("one_box", "1"))
    for loader, m in forms:  # compiled side by side
        _start_offline("loader_ab.py", "--compile", loader, m)
    tree1, tree3, predicated, one_box = (_compiled_offline("loader_ab.py", "--compile", loader, m)
                                         for loader, m in forms)
    assert (tree1["a_rows"], tree3["a_rows"]) == (1, 2)
    assert tree1["tma_loads"] == one_box["tma_loads"] == 4, (tree1, one_box)
    assert tree3["tma_loads"] == predicated["tma_loads"] == 6, (tree3, predicated)
    for form in (tree3, predicated, one_box):
        for field in ("wgmma", "waits", "reg"):
            assert form[field] == tree1[field], (field, form, tree1)
        assert form["local"] == 0
