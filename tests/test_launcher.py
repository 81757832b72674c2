"""The Gluon launcher's descriptor cache (variants/api.py ``_EncodedDescriptors``) on CPU: what it hands the
compiled kernel's C launch, and when it encodes a TMA descriptor. The launch itself, on the weights and
activations of every family and layout, is a GPU test (test_gpu_kernels.test_gluon_family_on_gpu)."""
from types import SimpleNamespace

import pytest
import torch
from triton.experimental.gluon import language as gl

from tunesearch.variants.api import _EncodedDescriptors

BOXES = [([8, 128], gl.NVMMASharedLayout.get_default_for([8, 128], gl.float16)),
         ([4, 256], gl.NVMMASharedLayout.get_default_for([4, 256], gl.int32)),
         ([1, 64], gl.NVMMASharedLayout.get_default_for([1, 64], gl.float16))]


def _cache():
    """A cache over a C launch that records its arguments and an encoder that records what it encodes."""
    launches, encoded = [], []

    def encode(descriptor, meta):
        encoded.append((meta, descriptor.base.data_ptr(), tuple(descriptor.shape)))
        return [f"map{meta}@{descriptor.base.data_ptr()}", *descriptor.shape, *descriptor.strides]

    cache = _EncodedDescriptors(lambda *args: launches.append(args), ["a", "p", "s"], BOXES, encode, False, True)
    return cache, launches, encoded


def _operands(M=8, K=256, N=128):
    return (torch.zeros(M, K, dtype=torch.float16), torch.zeros(K // 32, 4 * N, dtype=torch.int32),
            torch.zeros(K // 128, N, dtype=torch.float16))


def _launch(cache, a, packed, scales):
    """What the Gluon launcher does with the cache: the descriptors' arguments, then the C launch; False
    (nothing launched: the launcher takes the generic path) where there are none."""
    descriptors = cache.arguments(a, packed, scales)
    if descriptors is not None:
        cache.run(1, 2, 3, "stream", "function", "meta", descriptors, ("out", "ws"))
    return descriptors is not None


def test_the_c_launch_gets_the_base_arguments_then_each_descriptor_expanded_then_the_rest():
    cache, launches, _ = _cache()
    a, packed, scales = _operands()
    _launch(cache, a, packed, scales)
    (args,) = launches
    # grid, stream, function, cooperative, PDL, no global or profile scratch, the kernel's metadata, no
    # launch metadata and no hooks: Triton 3.6's 13 base arguments
    assert args[:13] == (1, 2, 3, "stream", "function", False, True, None, None, "meta", None, None, None)
    assert args[13:] == (f"mapa@{a.data_ptr()}", 8, 256, 256, 1,
                         f"mapp@{packed.data_ptr()}", 8, 512, 512, 1,
                         f"maps@{scales.data_ptr()}", 2, 128, 128, 1, "out", "ws")


def test_descriptors_are_encoded_once_per_operand_address_shape_and_strides():
    cache, launches, encoded = _cache()
    a, packed, scales = _operands()
    for _ in range(3):
        _launch(cache, a, packed, scales)
    assert len(encoded) == 3 and len(launches) == 3 and launches[0] == launches[2]
    a2 = torch.ones_like(a)  # other activations: only A's descriptor is new
    _launch(cache, a2, packed, scales)
    assert encoded[3:] == [("a", a2.data_ptr(), (8, 256))]
    _, packed2, scales2 = _operands()  # other weights: their pair is new
    _launch(cache, a, packed2, scales2)
    assert [e[0] for e in encoded[4:]] == ["p", "s"]
    assert launches[-1][13:18] == launches[0][13:18]  # A's from the first call, kept
    # the same address with another shape (a view of the first rows) is another descriptor
    _launch(cache, a[:4], packed, scales)
    assert encoded[-1] == ("a", a.data_ptr(), (4, 256))
    assert len(encoded) == 7


def test_a_kernel_reading_a_in_two_boxes_gets_both_descriptors_of_a_first_each_cached_with_a():
    # twotile's kernel reads A in boxes of HI and of LO rows (api.DESCRIPTOR_SOURCES): both of A's
    # descriptors, then the weights', each encoded once per operand address
    launches, encoded = [], []

    def encode(descriptor, meta):
        encoded.append((meta, descriptor.base.data_ptr(), tuple(descriptor.block_shape)))
        return [f"map{meta}@{descriptor.base.data_ptr()}"]

    lo_box = ([16, 128], gl.NVMMASharedLayout.get_default_for([16, 128], gl.float16))
    cache = _EncodedDescriptors(lambda *args: launches.append(args), ["hi", "lo", "p", "s"],
                                [BOXES[0], lo_box, *BOXES[1:]], encode, False, True, sources=(0, 0, 1, 2))
    a, packed, scales = _operands()
    for _ in range(2):
        _launch(cache, a, packed, scales)
    assert sorted(e[0] for e in encoded) == ["hi", "lo", "p", "s"]  # once each
    boxes = {e[0]: e[2] for e in encoded}
    assert boxes["hi"] == (8, 128) and boxes["lo"] == (16, 128)
    assert launches[0][13:] == launches[1][13:] == (f"maphi@{a.data_ptr()}", f"maplo@{a.data_ptr()}",
                                                    f"mapp@{packed.data_ptr()}", f"maps@{scales.data_ptr()}",
                                                    "out", "ws")
    a2 = torch.ones_like(a)  # other activations: both of A's descriptors are new, the weights' kept
    _launch(cache, a2, packed, scales)
    assert [e[0] for e in encoded[4:]] == ["hi", "lo"]


def test_twotiles_launch_arguments_hold_two_a_boxes_and_both_accumulators_slots_and_counters():
    # api._twotile_call on CPU tensors (the descriptors need no GPU): A in boxes of HI and LO rows, the
    # frag32 weights' and the scales' boxes, then C; a CTA a tile (a 1-D grid: the kernel's unit ranges)
    # with no workspace, or stream-K with fp32 slots [BN, HI + LO] for each part of each tile and two
    # counters a tile
    from tunesearch.variants import Variant
    from tunesearch.variants.api import DESCRIPTOR_SOURCES, _twotile_call
    from tunesearch.variants.space import cdiv, gluon_grid

    M, K, N = 150, 4096, 12288
    a, packed, scales = _operands(M, K, N)
    out = torch.empty(M, N, dtype=torch.float16)
    one = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk1.w4.s4.c2")
    kernel, grid, args, meta = _twotile_call(one.params, a, packed, scales, out, 128)
    n = len(DESCRIPTOR_SOURCES["twotile"])
    assert [list(d.block_shape) for d in args[:n]] == [[128, 64], [32, 64], [2, 256], [1, 64]]
    assert args[n] is out and args[n + 1] is out and args[n + 3:n + 6] == (M, N, K)
    assert grid == (N // 64, 1, 1) and meta["LO"] == 32 and meta["MAX_PARTS"] == 1
    stream = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk0.w4.s4.c2")
    _, grid, args, meta = _twotile_call(stream.params, a, packed, scales, out, 128)
    tiles = cdiv(N, 64)
    assert (grid, meta["MAX_PARTS"]) == gluon_grid(M, N, K, 160, 64, 64, 0, 2 * 132) and meta["MAX_PARTS"] > 1
    assert args[n + 1].numel() == tiles * meta["MAX_PARTS"] * 64 * 160
    assert args[n + 2].numel() >= 2 * tiles
    # two splits: two CTAs a tile, each a run of half its blocks (stream-K's unit ranges with P = 2 tiles)
    a, packed, scales = _operands(M, K, 4096)
    out = torch.empty(M, 4096, dtype=torch.float16)
    split = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk2.w4.s6.c1")
    _, grid, args, meta = _twotile_call(split.params, a, packed, scales, out, 128)
    tiles = 4096 // 64
    assert grid == (2 * tiles, 1, 1) and (K // 64) // 2 == 32 and meta["MAX_PARTS"] >= 2
    assert args[n + 1].numel() == tiles * meta["MAX_PARTS"] * 64 * 160 and args[n + 2].numel() >= 2 * tiles


def test_the_caches_are_bounded():
    cache, _, encoded = _cache()
    cache.A_LIMIT = 2
    _, packed, scales = _operands()
    activations = [torch.zeros(8, 256, dtype=torch.float16) for _ in range(3)]
    for a in activations:
        _launch(cache, a, packed, scales)
    assert len(cache.encoded_a) <= 2 and len(cache.encoded) == 1
    _launch(cache, activations[0], packed, scales)  # forgotten when the third came: encoded again
    assert encoded[-1] == ("a", activations[0].data_ptr(), (8, 256))


def test_alignment_is_checked_when_a_descriptor_is_made_and_an_operand_tma_cannot_read_launches_nothing(
        monkeypatch):
    from tunesearch.variants import api

    cache, launches, encoded = _cache()
    a, packed, scales = _operands()
    checked = []
    real = api.tma_aligned
    monkeypatch.setattr(api, "tma_aligned", lambda t: checked.append(t.data_ptr()) or real(t))
    assert all(_launch(cache, a, packed, scales) for _ in range(3))
    # each operand checked once, when its descriptor was made: a hit has that tensor's address and strides
    assert sorted(checked) == sorted(t.data_ptr() for t in (a, packed, scales)) and len(launches) == 3
    # A two bytes off 16 (and its rows 514 bytes apart), then weights four bytes off: nothing launched or
    # kept, so the caller takes the generic path (which copies them); asked again, checked again
    misaligned_a = torch.zeros(8, 257, dtype=torch.float16)[:, 1:]
    off_packed = torch.zeros(packed.numel() + 1, dtype=torch.int32)[1:].view(packed.shape)
    for args in [(misaligned_a, packed, scales), (a, off_packed, scales), (misaligned_a, packed, scales)]:
        assert _launch(cache, *args) is False
    assert len(launches) == 3 and len(encoded) == 3 and len(checked) == 3 + 3
    assert cache.arguments(misaligned_a, packed, scales) is None
    assert cache.arguments(a, packed, scales) == list(launches[0][13:28])


def _run(launch, scratch=0):
    return SimpleNamespace(launch=launch, global_scratch_size=scratch, profile_scratch_size=0,
                           launch_cooperative_grid=False, launch_pdl=False)


def test_the_cache_is_built_below_this_tritons_own_launcher_wrapper():
    # Triton 3.6 wraps the C launch in wrap_handle_tensordesc, which encodes every descriptor each call;
    # the cache takes the C launch and the descriptors' metadata from that wrapper. Built with this
    # Triton's own wrapper: the structure the launcher relies on is there.
    from triton.backends.nvidia.driver import wrap_handle_tensordesc

    def c_launch(*args):
        return args

    signature = {0: "tensordesc<fp16[8, 128]>", 1: "tensordesc<i32[4, 256]>", 2: "tensordesc<fp16[1, 64]>",
                 3: "*fp16", 4: "i32"}
    wrapped = wrap_handle_tensordesc(c_launch, signature, ["a", "p", "s"])
    cache = _EncodedDescriptors.of(_run(wrapped), BOXES)
    assert cache is not None and cache.raw is c_launch and cache.metas == ["a", "p", "s"]
    # where it cannot be (no wrapper, descriptors elsewhere in the signature, scratch to allocate), the
    # launcher passes descriptors to Triton's launcher as before
    assert _EncodedDescriptors.of(_run(c_launch), BOXES) is None
    assert _EncodedDescriptors.of(object(), BOXES) is None
    moved = wrap_handle_tensordesc(c_launch, {0: "*fp16", **{i + 1: s for i, s in signature.items()}},
                                   ["a", "p", "s"])
    assert _EncodedDescriptors.of(_run(moved), BOXES) is None
    assert _EncodedDescriptors.of(_run(wrapped, scratch=128), BOXES) is None


@pytest.mark.parametrize("bad", ["indices", "metas"])
def test_a_wrapper_of_another_shape_is_refused(bad):
    # a wrapper whose closure names the same cells but holds other values (another Triton's)
    launcher, tensordesc_indices, tensordesc_meta = (lambda *a: a), {0, 1, 2}, ["a", "p", "s"]
    if bad == "indices":
        tensordesc_indices = {0, 1}
    else:
        tensordesc_meta = ["a", "p"]

    def inner(*args):
        return launcher, tensordesc_indices, tensordesc_meta

    assert _EncodedDescriptors.of(_run(inner), BOXES) is None


def test_split_k_counters_a_launch_outgrows_are_kept_for_the_graphs_captured_over_them():
    # a CUDA graph captured over a launch counts in that launch's buffer on every replay: a larger launch
    # later gets a new zeroed buffer, and the old one stays allocated (freed, its memory would be reused
    # under the graph; test_gpu_kernels checks it on the GPU)
    from tunesearch.variants import api

    device = torch.device("cpu")
    saved = api._split_k_locks.pop((device, 0), None)
    try:
        first = api._locks(device, 10)
        assert api._locks(device, first.numel()) is first and not first.any()
        bigger = api._locks(device, first.numel() + 1)
        assert bigger is not first and bigger.numel() > first.numel() and not bigger.any()
        assert api._locks(device, 5) is bigger
        assert any(t is first for t in api._outgrown_locks)
    finally:
        if saved is not None:
            api._split_k_locks[(device, 0)] = saved


def test_split_k_counters_are_per_stream():
    # kernels of one stream run in turn and share counters; two streams' may run at once and must not
    from tunesearch.variants import api

    device = torch.device("cpu")
    one, other = api._locks(device, 8, stream=101), api._locks(device, 8, stream=202)
    assert one is not other and api._locks(device, 8, stream=101) is one
    assert api._locks(device, 8) is api._locks(device, 8, stream=0)  # no CUDA stream on the CPU


def test_a_stream_first_seen_in_a_graph_capture_gets_counters_zeroed_ahead(monkeypatch):
    # in a capture a torch.zeros is only recorded into that graph: a later graph captured over the same
    # counters, replayed first, would count in unwritten memory. So there a stream takes counters made and
    # zeroed outside any capture, and the next counters made outside one refill the spares
    from tunesearch.variants import api

    device = torch.device("cpu")
    monkeypatch.setattr(api, "_split_k_locks", {})
    monkeypatch.setattr(api, "_spare_locks", {})
    first = api._locks(device, 8, stream=1)  # made outside a capture: the spares with it
    spares = list(api._spare_locks[device])
    assert len(spares) == api.SPARE_LOCKS and not any(spare.any() for spare in spares)
    monkeypatch.setattr(api, "_capturing", lambda device: True)
    taken = [api._locks(device, 8, stream=s) for s in range(2, 2 + api.SPARE_LOCKS)]
    assert [t.data_ptr() for t in taken] == [t.data_ptr() for t in spares] and api._spare_locks[device] == []
    beyond = api._locks(device, 8, stream=99)  # none left: made in the capture, as before (recorded zeroing)
    too_large = api._locks(device, api.LOCKS_SIZE + 1, stream=98)
    assert beyond.data_ptr() not in {t.data_ptr() for t in spares} and too_large.numel() > api.LOCKS_SIZE
    assert api._spare_locks[device] == []  # no refill inside a capture
    monkeypatch.setattr(api, "_capturing", lambda device: False)
    assert api._locks(device, 8, stream=1) is first  # a launch outside a capture: its counters, spares again
    assert len(api._spare_locks[device]) == api.SPARE_LOCKS


def test_a_clustered_launch_is_the_compiled_kernels_own_with_x_in_clusters(monkeypatch):
    """rsmma's CLUSTER=2 (NOTES.md row 89): the kernel compiled for one CTA, launched by its own C launcher
    with num_ctas = 2 in the packed metadata (Triton 3.6's launcher then sets the cluster dimension and
    launches x times 2 CTAs), so the grid's x is halved; everything else as ``kernel[grid]`` passes it."""
    import triton

    from tunesearch.variants import api

    runs = []
    compiled = SimpleNamespace(packed_metadata=(8, 1, 74740), function="fn", _init_handles=lambda: None,
                               run=lambda *args: runs.append(args))
    kernel = SimpleNamespace(warmup=lambda *args, grid, **meta: compiled, constexprs=[2],
                             params=[None, None, SimpleNamespace(name="BM", default=None)])
    monkeypatch.setattr(triton.runtime.driver, "_active", SimpleNamespace(get_current_stream=lambda device: "s"))
    out = SimpleNamespace(get_device=lambda: 0)
    api._launch_clustered(kernel, (172, 2, 1), ("a", "b", "c", out), {"BM": 32}, 2)
    assert runs == [(86, 2, 1, "s", "fn", (8, 2, 74740), None, None, None, "a", "b", "c", out, 32)]
    assert api.cluster_meta((4, 1, 1000), 2) == (4, 2, 1000)


def test_rsmmapfs_launch_is_its_rsmma_twins_with_the_familys_kernel_and_where_its_partials_go():
    # api._rsmmapf_call on CPU tensors: rsmma's grid, descriptors, workspace and counters (the other splits
    # run rsmma's code; the owner reads the same slots), the family's kernel, IN_RING from RING, POLLS_ set
    from tunesearch.variants import Variant
    from tunesearch.variants.api import _kernel_call
    from tunesearch.variants.rsmmapf import POLLS, rsmmapf_kernel

    a, packed, scales = _operands(3, 4096, 4096)
    twin = Variant.from_id("rsmma.bm8.bn64.bk128.sk4.w4.s5.c3.skew2")
    want = _kernel_call(twin, a, packed, scales, torch.empty(3, 4096, dtype=torch.float16), 128)
    for ring in (1, 0):
        pf = Variant("rsmmapf", {**twin.params, "RING": ring})
        kernel, grid, args, meta = _kernel_call(pf, a, packed, scales, torch.empty(3, 4096, dtype=torch.float16), 128)
        assert kernel is rsmmapf_kernel and grid == want[1] == (64, 4, 1)
        assert meta == dict(want[3], IN_RING=bool(ring), POLLS_=POLLS) and meta["STAGED_SPLIT"] and meta["OWNER_FIRST"]
        assert [list(d.block_shape) for d in args[:3]] == [list(d.block_shape) for d in want[2][:3]]
        assert args[4].numel() == want[2][4].numel() == 64 * 4 * 8 * 64  # a [BN, BM] fp32 slot a part of each tile
        assert args[6:] == want[2][6:]  # M, N, K and C's strides


def test_rsmma_a_boxes_hold_ms_rows_below_a_token_tile_and_twotiles_stay_whole():
    # rsmma's launch on CPU tensors (NOTES.md row 104): below BM tokens A's box is R rows, M's last power of
    # two, by one 128-byte column chunk (the kernel copies a second box of A's last R rows where M > R, its
    # constexpr A_TAIL); at BM
    # tokens and past, the family's [BM, BK]. On 16-token tiles (rsmma.ONE_BOX_TILES) one box of M's next
    # power of two, the whole tile's from M=9. twotile's loader takes whole boxes at any M, below HI too.
    from tunesearch.variants import Variant
    from tunesearch.variants.api import _rsmma_call, _twotile_call

    tiles = {8: "rsmma.bm8.bn64.bk128.sk1.w4.s6.c3", 16: "rsmma.bm16.bn64.bk128.sk1.w4.s5.c3",
             32: "rsmma.bm32.bn64.bk128.sk2.w4.s4.c2", 256: "rsmma.bm256.bn64.bk128.sk1.w4.s3"}
    for bm, M, box in [(8, 1, [1, 64]), (8, 3, [2, 64]), (8, 7, [4, 64]), (8, 8, [8, 128]), (8, 300, [8, 128]),
                        (16, 3, [4, 64]), (16, 5, [8, 64]), (16, 9, [16, 128]), (16, 15, [16, 128]),
                        (32, 17, [16, 64]), (32, 31, [16, 64]), (256, 128, [128, 64]), (256, 255, [128, 64])]:
        a, packed, scales = _operands(M, 4096, 4096)
        _, _, args, meta = _rsmma_call(Variant.from_id(tiles[bm]).params, a, packed, scales,
                                       torch.empty(M, 4096, dtype=torch.float16), 128)
        assert list(args[0].block_shape) == box, (bm, M)
        # the kernel copies a second box of A's last rows exactly where its box holds fewer rows than M
        assert meta["A_TAIL"] == (box[0] < min(M, bm)), (bm, M)
    a, packed, scales = _operands(5, 4096, 4096)
    twotile = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk1.w4.s4.c2")
    _, _, args, _ = _twotile_call(twotile.params, a, packed, scales, torch.empty(5, 4096, dtype=torch.float16), 128)
    assert [list(d.block_shape) for d in args[:2]] == [[128, 64], [32, 64]]
