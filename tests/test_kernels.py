"""Every kernel family against a.float() @ dequantize(packed).float(), on every mask edge.

Runs in Triton's interpreter on the CPU (CI sets TRITON_INTERPRET=1) or on a CUDA GPU.
"""
import random

import pytest
import torch

from tunesearch.variants import (FAMILIES, GEMV_MAX_M, Variant, dequantize, matmul, quantize_pack,
                                 reference_matmul, variant_error, variant_space)
from tunesearch.variants.gemv import a_pairs_ok
from tunesearch.variants.space import DEQUANT_MIN_M, SWAPAB_MAX_M, chunk_columns

REL_TOL = 2e-3

# M = 1, 7, 33 cross the BM masks; N = 520 (4160 / 8) and 200 are no multiple of the widest BN;
# K = 256 puts the split boundary at one BK*SPLIT_K, K = 512 at two; G = 64 and 128 keep
# k // G apart from any tile size.
SHAPES = [(1, 520, 256, 64), (1, 200, 512, 128), (7, 520, 512, 64), (7, 200, 256, 128),
          (33, 200, 512, 64), (33, 520, 256, 128), (16, 72, 1024, 128)]


def sample_variants(M, N, K, G, per_family=3, seed=0):
    """A few variants per family, always including a split and a non-split one where valid."""
    rng = random.Random(f"{seed}-{M}-{N}-{K}-{G}")
    chosen = []
    space = variant_space(M, N, K, G)
    for family in FAMILIES:
        members = [v for v in space if v.family == family]
        if not members:
            continue
        splits = [v for v in members if v.params.get("SPLIT_K", 1) > 1]
        singles = [v for v in members if v.params.get("SPLIT_K", 1) == 1]
        picks = [rng.choice(group) for group in (splits, singles) if group]
        picks += rng.sample(members, min(per_family, len(members)))
        chosen += list(dict.fromkeys(picks))[:per_family]
    return chosen


def make_problem(M, N, K, G, device, seed):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(K, N, generator=gen)
    packed, scales = quantize_pack(w, G)
    a = torch.randn(M, K, generator=gen).to(torch.float16)
    ref = a.float() @ dequantize(packed, scales, G).float()
    return a.to(device), packed.to(device), scales.to(device), ref


def run_checked(variant, a, packed, scales, G, ref):
    out = torch.full(ref.shape, float("nan"), dtype=torch.float16, device=a.device)  # poison
    result = matmul(a, packed, scales, variant, G, out=out)
    assert result.data_ptr() == out.data_ptr()
    out = out.float().cpu()
    assert torch.isfinite(out).all(), f"{variant.id}: unwritten or non-finite output"
    err = (out - ref).abs().max().item() / ref.abs().max().item()
    assert err < REL_TOL, f"{variant.id}: relative max error {err:.3g}"


@pytest.mark.parametrize("M,N,K,G", SHAPES)
def test_kernels_match_dequantized_reference(M, N, K, G, kernel_device):
    a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=M * 1000 + N + K + G)
    variants = sample_variants(M, N, K, G)
    expected = {"gemm", "splitk"} | ({"gemv"} if M <= GEMV_MAX_M else set()) \
        | ({"swapab"} if M <= SWAPAB_MAX_M and G % 128 == 0 else set()) \
        | ({"dequant"} if M >= DEQUANT_MIN_M else set())
    assert {v.family for v in variants} == expected
    for variant in variants:
        run_checked(variant, a, packed, scales, G, ref)


@pytest.mark.parametrize("variant_id", [
    "gemv.bm1.bn64.bk256.sk1.w4.s1",   # BK > G: a scale row per k8 row
    "gemv.bm8.bn64.bk32.sk8.w4.s1",    # K split into 8 single-block slices
    "gemm.bm16.bn64.bk128.g1.w4.s2",   # BK > G in the tensor-core path
    "splitk.bm16.bn32.bk32.sk8.w4.s2",
    "gemv.bm4.bn64.bk64.sk2.w2.s2",     # BK > G with the register prefetch
])
def test_block_larger_than_group_and_deep_splits(variant_id, kernel_device):
    M, N, K, G = 5, 72, 256, 32
    variant = Variant.from_id(variant_id)
    assert variant_error(variant, M, N, K, G) is None
    a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=7)
    run_checked(variant, a, packed, scales, G, ref)


@pytest.mark.parametrize("variant_id,K,G", [
    ("gemv.bm1.bn64.bk32.sk4.w4.s1", 320, 64),      # 10 blocks in splits of 3, 3, 3, 1
    ("gemv.bm2.bn64.bk64.sk3.w2.s2", 320, 64),      # 5 blocks in 2, 2, 1, with the register prefetch
    ("splitk.bm16.bn32.bk32.sk4.w4.s2", 320, 64),
    ("swapab.bm16.bn64.bk128.sk2.w4.s2", 640, 128),  # 5 blocks in 3, 2
    ("swapab.bm16.bn64.bk128.sk4.w4.s3", 640, 128),  # 5 blocks in 2, 2, 1 and one empty split
])
def test_ragged_split_k(variant_id, K, G, kernel_device):
    """K is a multiple of BK but not of BK * SPLIT_K: the last split is shorter (or empty)."""
    M, N = 3, 72
    variant = Variant.from_id(variant_id)
    assert variant_error(variant, M, N, K, G) is None
    a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=13)
    run_checked(variant, a, packed, scales, G, ref)


def test_split_k_counters_rearm_between_launches(kernel_device):
    variant = Variant.from_id("splitk.bm16.bn32.bk32.sk4.w4.s2")
    for seed in range(3):
        a, packed, scales, ref = make_problem(3, 40, 256, 64, kernel_device, seed)
        run_checked(variant, a, packed, scales, 64, ref)


@pytest.mark.parametrize("variant_id", ["gemv.bm2.bn64.bk64.sk2.w4.s1", "gemm.bm16.bn32.bk64.g1.w4.s2",
                                        "splitk.bm16.bn32.bk32.sk2.w4.s2"])
def test_fp16_overflow_is_reported_as_inf(variant_id, kernel_device):
    M, N, K, G = 2, 40, 128, 64
    gen = torch.Generator().manual_seed(3)
    packed, scales = quantize_pack(torch.randn(K, N, generator=gen), G)
    a = torch.randn(M, K, generator=gen)
    a[0] *= 3000.0  # row 0 overflows fp16, row 1 does not
    a = a.half()
    ref = a.float() @ dequantize(packed, scales, G).float()
    assert ref[0].abs().max() > 65504 and ref[1].abs().max() < 1000
    out = matmul(a.to(kernel_device), packed.to(kernel_device), scales.to(kernel_device),
                 Variant.from_id(variant_id), G).float().cpu()
    big = ref.abs() > 65600  # beyond fp16 range after rounding
    assert big.any()
    assert torch.isinf(out[big]).all() and (torch.sign(out[big]) == torch.sign(ref[big])).all()
    assert torch.isfinite(out[1]).all()
    assert not torch.isnan(out).any()


def test_reference_matmul_is_dequantize_then_matmul():
    a, packed, scales, ref = make_problem(3, 24, 256, 128, "cpu", seed=5)
    out = reference_matmul(a, packed, scales, 128)
    assert out.dtype == torch.float16
    assert (out.float() - ref).abs().max().item() / ref.abs().max().item() < 1e-3


def test_no_rows_give_an_empty_result_as_torch_mm_does(kernel_device):
    # an empty batch (or an expert no token was routed to) is a call with M=0: nothing to launch
    from tunesearch import load_dispatch

    _, packed, scales, _ = make_problem(1, 72, 256, 128, kernel_device, seed=3)
    a = torch.empty(0, 256, dtype=torch.float16, device=kernel_device)
    for out in (matmul(a, packed, scales, Variant.from_id("gemv.bm1.bn64.bk64.sk2.w4.s1"), 128),
                reference_matmul(a, packed, scales, 128), load_dispatch()(a, packed, scales)):
        assert out.shape == (0, 72) and out.dtype == torch.float16 and out.device == a.device
    with pytest.raises(ValueError, match="K=248"):  # the other operands are still checked
        load_dispatch()(torch.empty(0, 248, dtype=torch.float16, device=kernel_device), packed, scales)


def test_strided_activations_are_handled(kernel_device):
    a, packed, scales, ref = make_problem(4, 40, 256, 64, kernel_device, seed=11)
    wide = torch.zeros(4, 512, dtype=torch.float16, device=kernel_device)
    wide[:, ::2] = a
    run_checked(Variant.from_id("gemv.bm4.bn64.bk64.sk2.w4.s1"), wide[:, ::2], packed, scales, 64, ref)



@pytest.mark.parametrize("layout", ["offset_by_one", "odd_row_stride"])
def test_gemv_activations_that_cannot_be_read_in_pairs(layout, kernel_device):
    # gemv reads a as int32 pairs of fp16 when its rows are contiguous and 4-byte aligned; these two
    # are contiguous along K but not pair-aligned, so they must take the one-fp16-per-load path
    # (on a GPU, reading them in pairs would fault on a misaligned address)
    a, packed, scales, ref = make_problem(2, 72, 256, 128, kernel_device, seed=13)
    if layout == "offset_by_one":
        buf = torch.zeros(2 * 256 + 1, dtype=torch.float16, device=kernel_device)
        buf[1:].copy_(a.reshape(-1))
        a = buf[1:].view(2, 256)
        assert a.data_ptr() % 4 == 2
    else:
        wide = torch.zeros(2, 257, dtype=torch.float16, device=kernel_device)
        wide[:, :256] = a
        a = wide[:, :256]
    assert not a_pairs_ok(a)
    for vid in ("gemv.bm1.bn64.bk64.sk2.w4.s2", "gemv.bm2.bn64.bk128.sk1.w4.s1"):
        run_checked(Variant.from_id(vid), a, packed, scales, 128, ref)

class TestMatmulRejectsBadInput:
    G = 64

    @pytest.fixture
    def ops(self):
        a, packed, scales, _ = make_problem(2, 40, 128, 64, "cpu", seed=1)
        return a, packed, scales, Variant.from_id("gemm.bm16.bn32.bk64.g1.w4.s2")

    def test_dtype(self, ops):
        a, packed, scales, v = ops
        with pytest.raises(ValueError, match="a must be float16"):
            matmul(a.float(), packed, scales, v, self.G)
        with pytest.raises(ValueError, match="packed must be int32"):
            matmul(a, packed.long(), scales, v, self.G)

    def test_shapes(self, ops):
        a, packed, scales, v = ops
        with pytest.raises(ValueError, match="K=64 but packed holds K=128"):
            matmul(a[:, :64], packed, scales, v, self.G)
        with pytest.raises(ValueError, match="2-D"):
            matmul(a[0], packed, scales, v, self.G)
        with pytest.raises(ValueError, match="multiple of group_size"):
            matmul(a, packed, scales, v, 96)

    def test_layout_and_device(self, ops, monkeypatch):
        a, packed, scales, v = ops
        with pytest.raises(ValueError, match="contiguous"):
            matmul(a, packed.t().contiguous().t(), scales, v, self.G)
        monkeypatch.setenv("TRITON_INTERPRET", "0")
        with pytest.raises(ValueError, match="need CUDA tensors"):
            matmul(a, packed, scales, v, self.G)

    def test_variant_must_fit_the_shape(self, ops):
        a, packed, scales, _ = ops
        with pytest.raises(ValueError, match="cannot run"):
            matmul(a, packed, scales, Variant.from_id("splitk.bm16.bn32.bk64.sk4.w4.s2"), self.G)
        with pytest.raises(ValueError, match="Variant"):
            matmul(a, packed, scales, "gemm.bm16.bn32.bk64.g1.w4.s2", self.G)


@pytest.mark.parametrize("variant_id", ["dequant.bk64.bn64.w4", "dequant.bk128.bn128.w8"])
def test_dequant_then_matmul_family(variant_id, kernel_device):
    M, N, K, G = 256, 200, 256, 64
    variant = Variant.from_id(variant_id)
    assert variant_error(variant, M, N, K, G) is None
    assert variant_error(variant, 16, N, K, G, prune=True) is not None  # searched where it can pay
    a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=9)
    run_checked(variant, a, packed, scales, G, ref)
    a, packed, scales, ref = make_problem(5, N, K, G, kernel_device, seed=10)  # but runs anywhere
    run_checked(variant, a, packed, scales, G, ref)


@pytest.mark.parametrize("variant_id,N", [("dequant.bk32.bn64.w4", 200), ("dequant.bk64.bn256.w4", 520),
                                          ("dequant.bk128.bn128.w8", 72)])
def test_dequant_reads_frag32_weights(variant_id, N, kernel_device):
    # The dequant family on weights kept in layout frag32 (its own dequantizer, variants/dequant_frag32.py):
    # the same product as on the base layout, N past the last column tile, BK of one to four chunks.
    from tunesearch.variants.layout import to_layout

    M, K, G = 33, 256, 64
    a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=31)
    variant = Variant.from_id(variant_id)
    assert variant_error(variant, M, N, K, G, layout="frag32") is None
    run_checked(variant, a, to_layout(packed, "frag32"), scales, G, ref)


@pytest.mark.parametrize("variant_id", ["gemv.bm1.bn64.bk64.sk2.w4.s1", "swapab.bm16.bn64.bk128.sk2.w4.s3",
                                        "dqchunk.bk32.bn128.mb1.w4", "gemm.bm16.bn32.bk64.g1.w4.s2"])
def test_families_that_read_only_the_base_layout_refuse_frag32(variant_id, kernel_device):
    from tunesearch.variants.layout import to_layout

    M, N, K, G = 1, 72, 256, 128
    variant = Variant.from_id(variant_id)
    assert "does not read weights in layout 'frag32'" in variant_error(variant, M, N, K, G, layout="frag32")
    assert variant_error(variant, M, N, K, G) is None
    a, packed, scales, _ = make_problem(M, N, K, G, kernel_device, seed=32)
    with pytest.raises(ValueError, match="layout 'frag32'"):
        matmul(a, to_layout(packed, "frag32"), scales, variant, G)


def test_dequant_in_chunks_covers_every_column(kernel_device):
    # 1 MB of fp16 at K=256 is 2048 columns: N=2200 takes a full chunk and a 152-column tail
    M, N, K, G = 33, 2200, 256, 64
    variant = Variant.from_id("dqchunk.bk32.bn128.mb1.w4")
    assert chunk_columns(variant.params, N, K) == 2048
    assert variant_error(variant, M, N, K, G, prune=True) is None
    assert "covers N" in variant_error(variant, M, 2048, K, G, prune=True)  # one chunk: the dequant family
    assert "M >=" in variant_error(variant, 16, N, K, G, prune=True)
    a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=21)
    run_checked(variant, a, packed, scales, G, ref)
    # the chunk is whole BN tiles, at least one, at most N
    assert chunk_columns(dict(MB=16, BN=128), 11008, 4096) == 2048
    assert chunk_columns(dict(MB=16, BN=128), 4096, 11008) == 640
    assert chunk_columns(dict(MB=1, BN=128), 64, 8192) == 64

def test_pruned_variants_still_compute_the_right_answer(kernel_device):
    """The runtime may pick a bucket's variant for an M it was not searched at."""
    M, N, K, G = 33, 72, 256, 64
    for vid in ("gemv.bm16.bn64.bk32.sk2.w4.s1", "gemm.bm64.bn128.bk64.g8.w4.s2"):
        variant = Variant.from_id(vid)
        assert variant_error(variant, M, N, K, G) is None
        assert variant_error(variant, M, N, K, G, prune=True) is not None
        a, packed, scales, ref = make_problem(M, N, K, G, kernel_device, seed=12)
        run_checked(variant, a, packed, scales, G, ref)
