"""The kernel families on a CUDA GPU, at llama shapes, over a sample of each variant space."""
import random

import pytest

from tunesearch.bench import check_variant, relative_error
from tunesearch.variants import FAMILIES, heuristic_variants, variant_space

SHAPES = [(1, 4096, 4096), (7, 4096, 11008), (33, 11008, 4096), (512, 4096, 4096), (1, 4096, 4160),
          (1, 4096, 12288), (4, 4096, 22016), (16, 11008, 4096), (64, 4096, 11008)]
PER_FAMILY = 5


@pytest.fixture(scope="module")
def compiler():
    from tunesearch.compile import Compiler

    with Compiler(0) as pool:
        yield pool


@pytest.mark.gpu
@pytest.mark.parametrize("M,K,N", SHAPES)
def test_families_on_gpu(M, K, N, compiler):
    rng = random.Random(f"{M}-{K}-{N}")
    space = variant_space(M, N, K, 128, device=0)
    checked = list(heuristic_variants(M, N, K, 128, device=0))
    for family in FAMILIES:
        members = [v for v in space if v.family == family]
        checked += rng.sample(members, min(PER_FAMILY, len(members)))
    checked = list(dict.fromkeys(checked))
    compile_errors = compiler.compile([v.id for v in checked], M, N, K, 128)
    failures = [f"{vid}: {err}" for vid, err in compile_errors.items() if err]
    for variant in checked:
        try:
            check_variant(variant, M, N, K, 128, seed=rng.randrange(2**31))
        except AssertionError as exc:
            failures.append(str(exc))
    print(f"M={M} K={K} N={N}: {len(checked)} variants checked")
    assert not failures, "\n".join(failures)


def words_to_unpack(total: int, extra=None):
    """int32 words on the GPU for the PTX tests: every nibble value in every position (zeros
    elsewhere), every value in all eight nibbles, ``extra`` (int64) words, then random ones up to
    ``total``."""
    import torch

    nibbles = torch.arange(16, dtype=torch.int64)
    words = [nibbles << (4 * j) for j in range(8)] + [nibbles * 0x11111111]
    if extra is not None:
        words.append(extra)
    random = total - sum(len(w) for w in words)
    x = torch.cat(words + [torch.randint(-2**31, 2**31 - 1, (random,), dtype=torch.int64)])
    return torch.where(x >= 2**31, x - 2**32, x).to(torch.int32).cuda()


def nibble_codes(x):
    """[8, len(x)]: nibble j of every int32 in ``x``."""
    import torch

    return (x.long()[None, :] >> (4 * torch.arange(8, device=x.device)[:, None])) & 0xF

@pytest.mark.gpu
def test_swapab_ptx_unpack_equals_the_plain_spelling_on_every_nibble():
    """The eight-plane PTX block against the plain-Triton unpack the interpreter tests, bit for bit,
    on every nibble value in every position of both int32 of a pair (plus random words)."""
    import torch
    import triton
    import triton.language as tl

    from tunesearch.variants.swapab import _nibble_planes

    @triton.jit
    def planes_kernel(x_ptr, ptx_ptr, plain_ptr, total, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        ptx = _nibble_planes(x, True)
        plain = _nibble_planes(x, False)
        for j in tl.static_range(8):
            tl.store(ptx_ptr + j * total + offs, ptx[j])
            tl.store(plain_ptr + j * total + offs, plain[j])

    x = words_to_unpack(4096).flip(0).contiguous()
    ptx = torch.empty(8, x.numel(), dtype=torch.float16, device="cuda")
    plain = torch.empty_like(ptx)
    planes_kernel[(x.numel() // 256,)](x, ptx, plain, x.numel(), BLOCK=256)
    assert torch.equal(ptx.view(torch.int16), plain.view(torch.int16))
    assert torch.equal(ptx.float(), (nibble_codes(x) - 8).float())


@pytest.mark.gpu
def test_gemv_ptx_fields_and_pairs_equal_the_plain_spelling():
    """gemv's two PTX blocks against the plain-Triton spellings the interpreter tests, bit for bit:
    the exponent fields on every nibble value in every position (plus random words), and the fp16
    pair conversion on every 16-bit pattern in both halves (NaNs compared as bits)."""
    import torch
    import triton
    import triton.language as tl

    from tunesearch.variants.gemv import _exponent_fields, _fp16_pair_to_f32

    @triton.jit
    def helpers_kernel(x_ptr, ptx_ptr, plain_ptr, total, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)
        ptx = _exponent_fields(x, True)
        plain = _exponent_fields(x, False)
        for j in tl.static_range(8):
            tl.store(ptx_ptr + j * total + offs, ptx[j])
            tl.store(plain_ptr + j * total + offs, plain[j])
        lo, hi = _fp16_pair_to_f32(x, True)
        plo, phi = _fp16_pair_to_f32(x, False)
        tl.store(ptx_ptr + 8 * total + offs, lo)
        tl.store(ptx_ptr + 9 * total + offs, hi)
        tl.store(plain_ptr + 8 * total + offs, plo)
        tl.store(plain_ptr + 9 * total + offs, phi)

    halves = torch.arange(65536, dtype=torch.int64)
    x = words_to_unpack(2**17, halves | (halves.flip(0) << 16))  # every 16-bit pattern in both halves
    ptx = torch.empty(10, x.numel(), dtype=torch.float32, device="cuda")
    plain = torch.empty_like(ptx)
    helpers_kernel[(x.numel() // 256,)](x, ptx, plain, x.numel(), BLOCK=256)
    assert torch.equal(ptx.view(torch.int32), plain.view(torch.int32))
    exact = 2.0 ** (23 - 4 * (torch.arange(8, device="cuda")[:, None] % 4)) + nibble_codes(x)
    assert torch.equal(ptx[:8].double(), exact.double())


# M across the 64- and 128-row tiles' masks (65, 127, 130) and inside a single partial tile (48, 24, 17, 12,
# 5, 3, 2 and 1: rsmma only, offered from M=1; 24, 17, 12, 5 and 1 inside its 32- and 16-token tiles; below a
# tile's rows A's boxes have R rows, M's last power of two, the second one of A's last R rows where M > R, at
# the slot's row M - R: 1 at M = 3, 5, 17, 65, 4 at 12, 63 at 127; on 16-token tiles one box of M's next
# power of two, `rsmma.a_rows_box`); N = 200 and 520 no multiple of any BN, 200 not even of the 4-word
# copies; G = 64 leaves BK = 64 only; K = 256 with 4 splits of one block.
DQMMA_SHAPES = [(64, 4096, 4096, 128), (65, 512, 200, 64), (127, 256, 520, 128), (130, 1024, 4160, 128),
                (192, 11008, 4096, 128), (48, 4096, 11008, 128), (24, 4096, 11008, 128), (5, 1024, 520, 128),
                (3, 4096, 520, 128), (2, 1024, 200, 64), (17, 1024, 520, 128), (12, 2048, 520, 128),
                (1, 1024, 200, 128), (300, 1024, 520, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("family,layout", [("dqmma", "base"), ("rsmma", "base"), ("rsmma", "frag32"),
                                           ("twotile", "frag32"), ("rsmmapf", "frag32")])
@pytest.mark.parametrize("M,K,N,G", DQMMA_SHAPES)
def test_gluon_family_on_gpu(M, K, N, G, family, layout):
    """The Gluon families (no interpreter) against A @ dequantize(W) on the mask edges, through matmul with
    contiguous, transposed and misaligned activations (TMA then reads an aligned copy), through the
    dispatch launcher, and with misaligned weight views; their split reductions bitwise the same on
    every run. rsmma also on weights in layout frag32 (NOTES.md row 69); twotile (frag32 only) where one of
    its tiles holds M (M = 65, 130, 192 here), and its first pick at M past two of its tiles and at M=5 too."""
    import torch
    import triton

    from tunesearch.variants import DeviceLimits, dequantize, matmul, quantize_pack
    from tunesearch.variants.api import make_launcher
    from tunesearch.variants.layout import to_layout

    from tunesearch.variants.space import DQMMA_M, RSMMA_M, RSMMAPF_M, TWOTILE_M

    limits = DeviceLimits.of(0)
    if not limits.gluon:
        pytest.skip(f"{limits.name}: no Gluon family here")
    lo, hi = {"dqmma": DQMMA_M, "rsmma": RSMMA_M, "twotile": TWOTILE_M, "rsmmapf": RSMMAPF_M}[family]
    if not lo <= M <= hi or (family == "twotile" and 96 < M <= 128):
        pytest.skip(f"{family} is not offered at M = {M}")
    space = [v for v in variant_space(M, N, K, G, device=0, layout=layout) if v.family == family]
    assert space
    rng = random.Random(f"{family}-{M}-{K}-{N}-{G}")
    picks = [v for v in heuristic_variants(M, N, K, G, device=0, layout=layout) if v.family == family]
    # split tiles: split-K's, or twotile's stream-K (its only reduction)
    split = [rng.choice([v for v in space if v.params["SPLIT_K"] > 1 or (family == "twotile" and
                                                                        v.params["SPLIT_K"] == 0)] or space)]
    picks += split
    # stream-K (SPLIT_K=0) at the narrowest and widest column tiles
    picks += [rng.choice([v for v in space if v.params["SPLIT_K"] == 0 and v.params["BN"] == bn] or space)
              for bn in ((64, 256) if family == "dqmma" else (64, 128))]
    if family == "dqmma":
        picks += [rng.choice([v for v in space if v.params["BN"] == 256] or space)]  # the MMA warps load
    elif family == "twotile":  # every LO offered (the LO box shifted to M's end where it passes HI + LO's
        # rows), both column tiles, every CTAs an SM and split count offered
        picks += [rng.choice(c) for c in ([v for v in space if v.params["LO"] == lo] for lo in (8, 16, 32, 64)) if c]
        picks += [rng.choice(c) for c in ([v for v in space if v.params[name] == x] for name, x in
                                          (("BN", 64), ("BN", 128), ("CTAS", 2), ("CTAS", 3), ("SPLIT_K", 2),
                                           ("SPLIT_K", 4))) if c]
    else:  # the narrowest and widest token tiles (8 at M <= 8 where offered), one warp group and two, several
        # CTAs an SM where offered
        picks += [rng.choice([v for v in space if v.params["BM"] == bm] or space) for bm in (8, 16, 32, 64, 256)]
        picks += [rng.choice([v for v in space if v.params["BN"] == bn] or space) for bn in (64, 128)]
        picks += [rng.choice(c) for c in ([v for v in space if v.params["CTAS"] == n] for n in (2, 3, 4)) if c]
        # 16-token tiles at 3 CTAs an SM (each block's partial scaled after its wgmma) and at 4 (too few
        # registers for that: the fragment scaled), rsmma_launch.scale_after
        picks += [rng.choice(c) for c in ([v for v in space if v.params["BM"] == 16 and v.params["BK"] == 128
                                           and v.params["CTAS"] == n] for n in (3, 4)) if c]
    picks += rng.sample(space, min(3, len(space)))
    gen = torch.Generator().manual_seed(M + N + K)
    packed, scales = quantize_pack(torch.randn(K, N, generator=gen), G)
    packed, scales = packed.cuda(), scales.cuda()
    a = torch.randn(M, K, generator=gen).half().cuda()
    ref = a.float() @ dequantize(packed, scales, G).float()
    packed = to_layout(packed, layout)
    views = {"contiguous": a, "transposed": a.t().contiguous().t(),
             "misaligned": torch.cat([a.new_zeros(M, 1), a], 1)[:, 1:]}
    failures = []
    for variant in dict.fromkeys(picks):
        for name, view in views.items():
            assert torch.equal(view, a)
            for run in ("matmul", "launcher"):
                out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
                if run == "matmul":
                    matmul(view, packed, scales, variant, G, out=out)
                else:
                    make_launcher(variant, view, packed, scales, out, G)(view, packed, scales, out)
                err = relative_error(out, ref)
                if not err < 2e-3:  # NaN (an unwritten output) fails too
                    failures.append(f"{variant.id} {name} {run}: relative error {err:.3g}")
    if family == "twotile":  # any M runs: past two of the first pick's tiles (the last shifted inside A), and
        # below its HI tokens (whole boxes there: rsmma's boxes of M's rows are not for twotile's loader)
        tile = picks[0].params["BM"] + picks[0].params["LO"]
        for rows in (2 * tile + 5, 5):
            a3 = torch.randn(rows, K, generator=gen).half().cuda()
            err = relative_error(matmul(a3, packed, scales, picks[0], G),
                                 a3.float() @ dequantize(packed, scales, G).float())  # either layout
            if not err < 2e-3:
                failures.append(f"{picks[0].id} at M={rows}: relative error {err:.3g}")
    # weights TMA cannot read as they are (contiguous, but the base 4 or 2 bytes off 16): an aligned copy
    off_p = torch.empty(packed.numel() + 1, dtype=packed.dtype, device="cuda")[1:].view(packed.shape).copy_(packed)
    off_s = torch.empty(scales.numel() + 1, dtype=scales.dtype, device="cuda")[1:].view(scales.shape).copy_(scales)
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    matmul(a, off_p, off_s, picks[0], G, out=out)
    err = relative_error(out, ref)
    if not err < 2e-3:
        failures.append(f"{picks[0].id} sliced weights: relative error {err:.3g}")
    # one launcher, later calls on other tensors of the same shapes: its descriptors follow their addresses
    # (the launcher keeps the boxes and layouts of its first call, and the weights' descriptors per weight
    # tensor): other operands, then the first ones again, then the others again, each against its own
    launch = make_launcher(picks[0], a, packed, scales, torch.empty(M, N, dtype=torch.float16, device="cuda"), G)
    others = [(torch.randn_like(a), packed.clone(), scales * 0.5) for _ in range(2)]
    for a2, packed2, scales2 in others + [(a, packed, scales)] + others:
        ref2 = a2.float() @ dequantize(packed2, scales2, G).float()
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        launch(a2, packed2, scales2, out)
        err = relative_error(out, ref2)
        if not err < 2e-3:
            failures.append(f"{picks[0].id} launcher on other operands: relative error {err:.3g}")
    # on Triton 3.6 the descriptors are encoded once per operand address, below Triton's wrapper
    if triton.__version__.startswith("3.6"):
        encoded = launch.descriptors
        if encoded is None:
            failures.append(f"{picks[0].id} launcher: encodes its descriptors every call on Triton 3.6")
        elif (len(encoded.encoded), len(encoded.encoded_a)) != (3, 3):  # the first operands and two others
            failures.append(f"{picks[0].id} launcher: {len(encoded.encoded)} weight descriptor pairs and "
                            f"{len(encoded.encoded_a)} of A encoded for 3 of each")
    # the split reductions (stream-K's, split-K's) sum the partials in the contributors' order, whichever
    # arrives last: bitwise the same result on every run
    for variant in split:
        runs = [matmul(a, packed, scales, variant, G) for _ in range(3)]
        if not all(torch.equal(runs[0], r) for r in runs[1:]):
            failures.append(f"{variant.id}: results differ between runs")
    assert not failures, "\n".join(failures)


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id", ["splitk.bm16.bn32.bk32.sk2.w4.s2", "dequant.bk32.bn128.w4"])
def test_a_captured_graph_keeps_its_buffers_when_later_calls_need_larger_ones(variant_id):
    """A CUDA graph captured over a split-K launch (its tiles' arrival counters, shared by a device's stream) or the
    dequantize route (its fp16 weight workspace), then eager calls on shapes that need more (which once
    replaced the shared buffer and freed the one under the graph), then allocations that would take the
    freed memory: the replay is still right and writes nothing into them."""
    import torch

    from tunesearch.variants import Variant, dequantize, matmul, quantize_pack
    from tunesearch.variants.api import _split_k_locks

    variant, K, N, M = Variant.from_id(variant_id), 4096, 4096, 16
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    a = torch.randn(M, K, device="cuda").half()
    out = matmul(a, packed, scales, variant)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        matmul(a, packed, scales, variant, out=out)
    # larger: more split tiles than the counters hold (split-K), or a weight twice the size (dequantize)
    if variant.params.get("SPLIT_K", 1) > 1:
        counters = _split_k_locks[(a.device, torch.cuda.current_stream().cuda_stream)].numel()
        big_m, big_k = (counters // (N // variant.params["BN"]) + 1) * variant.params["BM"], K
    else:
        big_m, big_k = M, 2 * K
    big_p, big_s = quantize_pack(torch.randn(big_k, N, device="cuda"), 128)
    big_a = torch.randn(big_m, big_k, device="cuda").half()
    big_out = matmul(big_a, big_p, big_s, variant)
    assert relative_error(big_out, big_a.float() @ dequantize(big_p, big_s, 128).float()) < 2e-3
    del big_p, big_s, big_a, big_out
    torch.cuda.synchronize()
    # large blocks (the workspace's pool) and small ones (the counters', under 1 MB)
    junk = ([torch.full((1 << 20,), 3, dtype=torch.int32, device="cuda") for _ in range(64)]
            + [torch.full((4096,), 3, dtype=torch.int32, device="cuda") for _ in range(256)])
    a.copy_(torch.randn_like(a))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert relative_error(out, a.float() @ dequantize(packed, scales, 128).float()) < 2e-3  # NaN (unwritten) fails
    assert all(bool((j == 3).all()) for j in junk)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["splitk", "rsmma"])
def test_graphs_captured_one_after_another_on_a_new_stream_replay_right_in_any_order(family):
    """Graphs per batch size, captured in turn on one stream, share its split-K counters. Made in the first
    capture, their zeroing was only recorded into that graph, so a later graph replayed first counted in
    memory nothing had written (dirtied here as a freed pool would leave it). A stream first seen in a
    capture now takes counters zeroed ahead, outside it."""
    import torch

    from tunesearch.variants import DeviceLimits, Variant, dequantize, quantize_pack
    from tunesearch.variants import api

    if family == "rsmma" and not DeviceLimits.of(0).gluon:
        pytest.skip("no Gluon here")
    variant = Variant.from_id({"splitk": "splitk.bm16.bn32.bk32.sk4.w4.s2",
                               "rsmma": "rsmma.bm16.bn64.bk128.sk4.w4.s4"}[family])
    K, N = 4096, 512
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    w = dequantize(packed, scales, 128).float()
    inputs = [torch.randn(m, K, device="cuda").half() for m in (16, 9)]
    outs = [api.matmul(a, packed, scales, variant) for a in inputs]  # eager first: compiled, spares made
    spares = {t.data_ptr() for t in api._spare_locks[inputs[0].device]}
    junk = [torch.full((4096,), 7, dtype=torch.int32, device="cuda") for _ in range(512)]
    del junk
    torch.cuda.empty_cache()  # memory a fresh graph pool may be given, holding 7s
    capture, graphs = torch.cuda.Stream(), [torch.cuda.CUDAGraph() for _ in inputs]
    for graph, a, out in zip(graphs, inputs, outs):
        with torch.cuda.graph(graph, stream=capture):
            api.matmul(a, packed, scales, variant, out=out)
    assert api._split_k_locks[(inputs[0].device, capture.cuda_stream)].data_ptr() in spares
    for i in (1, 0, 1):  # the later graph first
        outs[i].fill_(float("nan"))
        graphs[i].replay()
        torch.cuda.synchronize()
        assert relative_error(outs[i], inputs[i].float() @ w) < 2e-3, f"graph {i}"


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["splitk", "rsmma"])
def test_split_k_launches_in_two_streams_at_once(family):
    """Split-K launches of one variant in two streams, queued behind a sleep so that the two queues run
    at the same time (few CTAs each): each split tile counts its arrivals in its stream's counters, so
    every result is right (with one set of counters per device, one stream's splits counted the other's)."""
    import torch

    from tunesearch.variants import DeviceLimits, Variant, dequantize, quantize_pack
    from tunesearch.variants.api import make_launcher, matmul

    if family == "rsmma" and not DeviceLimits.of(0).gluon:
        pytest.skip("no Gluon here")
    variant = Variant.from_id({"splitk": "splitk.bm16.bn32.bk32.sk4.w4.s2",
                               "rsmma": "rsmma.bm16.bn64.bk128.sk4.w4.s4"}[family])
    M, K, N = 16, 4096, 512  # 8 to 16 column tiles x 4 splits: both streams' CTAs fit the GPU together
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    w = dequantize(packed, scales, 128).float()
    streams = [torch.cuda.Stream() for _ in range(2)]
    inputs = [torch.randn(M, K, device="cuda").half() for _ in streams]
    launchers = [make_launcher(variant, x, packed, scales, torch.empty(M, N, dtype=torch.float16, device="cuda"),
                               128) for x in inputs]
    for run in ("matmul", "launcher"):
        outs = [[torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda") for _ in range(200)]
                for _ in streams]
        torch.cuda.synchronize()
        for stream in streams:  # both queues held back while the host fills them, then run side by side
            with torch.cuda.stream(stream):
                torch.cuda._sleep(100_000_000)  # ~50 ms of GPU clock
        for i in range(200):
            for s, stream in enumerate(streams):
                with torch.cuda.stream(stream):
                    if run == "matmul":
                        matmul(inputs[s], packed, scales, variant, out=outs[s][i])
                    else:
                        launchers[s](inputs[s], packed, scales, outs[s][i])
        torch.cuda.synchronize()
        for s, x in enumerate(inputs):
            ref = x.float() @ w
            bad = [e for e in (relative_error(o, ref) for o in outs[s]) if not e < 2e-3]  # NaN (unwritten) counts
            assert not bad, f"{run}, stream {s}: {len(bad)} of 200 wrong (first error {bad[0]:.3g})"


def _rsmma_operands(M: int, K: int, N: int, layout: str, seed: int):
    """A [M, K], the packed weights in ``layout`` and their scales on the GPU, and the fp32 reference
    A @ dequantize(W), for the rsmma launch tests (skipped where the Gluon family cannot run)."""
    import torch

    from tunesearch.variants import DeviceLimits, dequantize, quantize_pack
    from tunesearch.variants.layout import to_layout

    if not DeviceLimits.of(0).gluon:
        pytest.skip("no Gluon family here")
    gen = torch.Generator().manual_seed(seed)
    packed, scales = quantize_pack(torch.randn(K, N, generator=gen), 128)
    a = torch.randn(M, K, generator=gen).half().cuda()
    ref = a.float() @ dequantize(packed, scales, 128).float().cuda()
    packed, scales = packed.cuda(), scales.cuda()
    return a, packed if layout == "base" else to_layout(packed, layout), scales, ref


def _rsmma_both_ways(variant_id: str, a, packed, scales, flag: str, launches: int = 1):
    """C from rsmma's family launch of ``variant_id`` with its meta ``flag`` on (True) and off (False),
    ``launches`` times each way in turn, each into a NaN-filled C (an unwritten value shows): the outputs
    by setting, and the family launch's meta (for the caller to check what it set)."""
    import torch

    from tunesearch.variants import Variant
    from tunesearch.variants.api import _rsmma_call

    M, N = a.shape[0], scales.shape[1]
    outs = {True: [], False: []}
    for _ in range(launches):
        for on in (True, False):
            out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
            kernel, grid, args, meta = _rsmma_call(Variant.from_id(variant_id).params, a, packed, scales, out, 128)
            kernel[grid](*args, **(meta | {flag: on}))
            outs[on].append(out)
    return outs, meta


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id", ["rsmma.bm256.bn128.bk64.sk1.w8.s3", "rsmma.bm128.bn64.bk128.sk1.w4.s5.c2",
                                        "rsmma.bm8.bn64.bk128.sk1.w4.s5.c3"])
@pytest.mark.parametrize("layout", ["base", "frag32"])
def test_rsmma_staged_store_gives_the_same_bits(variant_id, layout):
    """A one-split tile leaving through the drained ring (STAGED_C, the family's launch) against the store
    straight from the accumulator's layout: the same bits, and right, with rows and columns past C's edge
    in the last tiles (M=300, N=1032) and C's columns unpaired from rsmma's paired accumulator rows."""
    import torch

    a, packed, scales, ref = _rsmma_operands(300, 1024, 1032, layout, seed=11)
    outs, meta = _rsmma_both_ways(variant_id, a, packed, scales, "STAGED_C")
    assert meta["STAGED_C"] and meta["MAX_PARTS"] == 1
    assert torch.equal(outs[True][0], outs[False][0])
    assert relative_error(outs[True][0], ref) < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id, M, K, N", [("rsmma.bm256.bn128.bk64.sk3.w8.s4", 300, 4096, 1032),
                                                 ("rsmma.bm8.bn64.bk128.sk4.w4.s6.c3", 5, 11008, 1000),
                                                 ("rsmma.bm64.bn64.bk128.sk2.w4.s8.skew3", 70, 4096, 520),
                                                 ("rsmma.bm128.bn64.bk64.sk4.w4.s4", 130, 3072, 264),
                                                 ("rsmma.bm16.bn64.bk128.sk4.w4.s3", 16, 4096, 200)])
@pytest.mark.parametrize("layout", ["base", "frag32"])
def test_rsmma_split_reduction_through_the_ring_gives_the_same_bits(variant_id, M, K, N, layout):
    """Split tiles whose last part reads the others' fp32 partials back through the drained ring by async
    copies and stores C staged (STAGED_SPLIT, the family's launch) against the same splits reduced in the
    accumulator's registers: the same bits, launch after launch (any part may end last, and with a skew
    the first may sum), and right, with rows and columns past C's edge (a second token tile of 44 rows
    at M=300; K=11008 is 86 blocks in 4 splits, K=3072 48 blocks of 64; a ring of three partials with
    four splits brings two a pass, NOTES.md row 84)."""
    import torch

    a, packed, scales, ref = _rsmma_operands(M, K, N, layout, seed=13)
    outs, meta = _rsmma_both_ways(variant_id, a, packed, scales, "STAGED_SPLIT", launches=5)
    assert meta["STAGED_SPLIT"] and meta["MAX_PARTS"] == meta["SPLIT_K"] > 1
    assert all(torch.equal(out, outs[False][0]) for out in outs[True] + outs[False])
    assert relative_error(outs[True][0], ref) < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id, M, K, N", [("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4", 5, 4096, 1032),
                                                 ("rsmma.bm16.bn64.bk128.sk4.w4.s8.c3.skew2", 16, 11008, 1000),
                                                 ("rsmma.bm32.bn64.bk128.sk2.w4.s6.skew3", 40, 4096, 520)])
@pytest.mark.parametrize("layout", ["base", "frag32"])
def test_rsmma_skewed_splits_give_the_same_bits_whoever_sums(variant_id, M, K, N, layout):
    """Skewed splits (the first split SKEW blocks longer from each other one) whose first split sums the
    others' partials itself when they are in (OWNER_FIRST, the family's launch) against the same splits
    reduced by the last to arrive: the same bits, launch after launch (either split may end last, so
    either path may run), and right, with rows and columns past C's edge and K = 86 blocks in 4 splits."""
    import torch

    a, packed, scales, ref = _rsmma_operands(M, K, N, layout, seed=12)
    outs, meta = _rsmma_both_ways(variant_id, a, packed, scales, "OWNER_FIRST", launches=5)
    assert meta["SKEW"] > 0 and meta["OWNER_FIRST"] and meta["MAX_PARTS"] == meta["SPLIT_K"]
    assert all(torch.equal(out, outs[False][0]) for out in outs[True] + outs[False])
    assert relative_error(outs[True][0], ref) < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id, M, K, N", [("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4", 5, 4096, 1032),
                                                 ("rsmma.bm16.bn64.bk128.sk4.w4.s8.c3.skew2", 16, 11008, 1000),
                                                 ("rsmma.bm8.bn64.bk128.sk4.w4.s5.c3", 3, 4096, 4096),
                                                 ("rsmma.bm32.bn64.bk128.sk2.w4.s6.skew3.cl2", 40, 4096, 1024)])
@pytest.mark.parametrize("ring", [1, 0])
def test_rsmmapf_gives_its_rsmma_twins_bits_whether_its_loader_fetches_or_gives_up(variant_id, M, K, N, ring):
    """rsmmapf (the owner's loader prefetching the other splits' partials) adds them in rsmma's order: the
    very bits of its rsmma twin, through ``matmul`` and the runtime's launcher, launch after launch (whoever
    ends last), with the loader polling as the family launches it and giving up after one load (POLLS_=1:
    then the owner takes rsmma's path), each into a NaN-filled C; and right. Rows and columns past C's edge,
    K = 86 blocks in 4 splits, a cluster of two."""
    import torch

    from tunesearch.variants import Variant, matmul
    from tunesearch.variants.api import _kernel_call, launch_kernel, make_launcher

    a, packed, scales, ref = _rsmma_operands(M, K, N, "frag32", seed=15)
    twin = Variant.from_id(variant_id)
    want = matmul(a, packed, scales, twin, 128)
    pf = Variant("rsmmapf", {**twin.params, "RING": ring})
    nan = lambda: torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")  # noqa: E731
    outs = [matmul(a, packed, scales, pf, 128, out=nan()) for _ in range(3)]
    launcher = make_launcher(pf, a, packed, scales, nan(), 128)
    outs += [launcher(a, packed, scales, nan()) for _ in range(3)]
    for _ in range(3):
        out = nan()
        kernel, grid, args, meta = _kernel_call(pf, a, packed, scales, out, 128)
        assert meta["IN_RING"] == bool(ring) and meta["STAGED_SPLIT"]
        launch_kernel(kernel, grid, args, dict(meta, POLLS_=1), pf["CLUSTER"])
        outs.append(out)
    bad = [i for i, out in enumerate(outs) if not torch.equal(out, want)]
    assert not bad, f"launches {bad} of {len(outs)} differ from {twin.id}'s bits"
    assert relative_error(want, ref) < 2e-3


@pytest.mark.gpu
def test_the_compile_pool_builds_rsmmapf_and_rsmma_on_frag32_weights(compiler):
    """The sweep's compile pool on a frag32 key (tunesearch.compile): rsmmapf, which reads frag32 only, and
    rsmma compile on weights of that layout's shape (_s81: on base-shaped ones every rsmmapf trial of the
    sweep failed with "error encountered during parsing")."""
    ids = ["rsmmapf.bm8.bn64.bk128.sk2.w4.s6.c3.skew4.ring1", "rsmmapf.bm8.bn64.bk128.sk2.w4.s6.c3.skew4",
           "rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4"]
    assert compiler.compile(ids, 1, 11008, 4096, 128, "frag32") == {vid: None for vid in ids}


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id, M, K, N", [("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4", 5, 4096, 1000),
                                                 ("rsmma.bm16.bn64.bk128.sk1.w4.s5.c3", 16, 11008, 1000),
                                                 ("rsmma.bm64.bn128.bk64.sk1.w8.s5.c2", 70, 4096, 1000)])
@pytest.mark.parametrize("layout", ["base", "frag32"])
def test_rsmma_launched_in_clusters_gives_the_same_bits(variant_id, M, K, N, layout):
    """CLUSTER=2 launches the same kernel with neighbouring column tiles paired in clusters (NOTES.md row
    89): through ``matmul`` (the generic launch) and the runtime's launcher (the compiled kernel's own C
    launch), each into a NaN-filled C, the very bits of the unclustered launch, launch after launch, and
    right; the last column tile of 1000 columns is partial."""
    import torch

    from tunesearch.variants import Variant, matmul
    from tunesearch.variants.api import make_launcher

    a, packed, scales, ref = _rsmma_operands(M, K, N, layout, seed=14)
    want = matmul(a, packed, scales, Variant.from_id(variant_id), 128)
    paired = Variant.from_id(variant_id + ".cl2")
    nan = lambda: torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")  # noqa: E731
    launcher = make_launcher(paired, a, packed, scales, nan(), 128)
    outs = [matmul(a, packed, scales, paired, 128, out=nan()) for _ in range(3)]
    outs += [launcher(a, packed, scales, nan()) for _ in range(3)]
    assert all(torch.equal(out, want) for out in outs)
    assert relative_error(want, ref) < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("variant_id", ["rsmma.bm32.bn64.bk128.sk1.w4.s4.c3", "rsmma.bm64.bn64.bk128.sk2.w4.s8.skew3",
                                        "rsmma.bm64.bn64.bk128.sk2.w4.s8", "rsmma.bm128.bn64.bk64.sk0.w4.s4.c2",
                                        "rsmma.bm16.bn64.bk128.sk2.w4.s5.c3"])
@pytest.mark.parametrize("rows_past", [1, 7, 8, 9, 15])
@pytest.mark.parametrize("layout", ["base", "frag32"])
def test_rsmma_shifted_last_token_tile_stores_only_its_own_rows(variant_id, rows_past, layout):
    """Where M >= BM, a last token tile that M fills in part reads A from row M - BM (dqmma.token_origin):
    its rows below its own first token are its neighbour's, computed again and masked. At M = 2 BM - r the
    first tile's rows must hold the very bits of a launch at M = 2 BM (the same tile, the same sums). With
    stream-K the two tiles sum in different orders, so a store of the neighbour's copy would break them;
    with fixed splits both copies have the same bits, and there the check is that they are right. The last
    tile's rows must match the reference, and C's row past M stay untouched (C NaN-filled, one row longer
    than M), with every reduction (one split, register and staged splits, skew, stream-K). Below BM the one
    tile's box starts at row 0 as before (M = BM - r)."""
    import torch

    from tunesearch.variants import Variant, matmul

    variant = Variant.from_id(variant_id)
    bm = variant["BM"]
    a, packed, scales, ref = _rsmma_operands(2 * bm, 4096, 520, layout, seed=22)
    full = matmul(a, packed, scales, variant, 128)
    for M in (2 * bm - rows_past, bm - rows_past):  # rows_past < BM for every variant here
        out = torch.full((M + 1, 520), float("nan"), dtype=torch.float16, device="cuda")
        got = matmul(a[:M], packed, scales, variant, 128, out=out[:M])
        assert torch.isfinite(got).all() and relative_error(got, ref[:M]) < 2e-3
        assert torch.isnan(out[M]).all()
        if M > bm:
            assert torch.equal(got[:bm], full[:bm])
