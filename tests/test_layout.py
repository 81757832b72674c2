import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tunesearch.variants import dequantize, layout, pack_linear, quantize_pack, unpack


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """Independent packer for the tests: code of row k at bits 4*(k%8) of packed[k//8]."""
    k, n = codes.shape
    out = torch.zeros(k // 8, n, dtype=torch.int64)
    for r in range(k):
        out[r // 8] |= codes[r].long() << (4 * (r % 8))
    out = torch.where(out >= 2**31, out - 2**32, out)
    return out.to(torch.int32)


@settings(max_examples=30, deadline=None)
@given(k8=st.integers(1, 6), n=st.integers(1, 9), seed=st.integers(0, 2**31 - 1))
def test_unpack_inverts_the_bit_layout(k8, n, seed):
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 16, (k8 * 8, n), generator=gen, dtype=torch.int32)
    assert torch.equal(unpack(pack_codes(codes)), codes)
    assert torch.equal(layout.pack_codes(codes), pack_codes(codes))  # the library's packer, this one's bits


def test_eighth_nibble_sets_the_sign_bit_and_is_masked():
    codes = torch.zeros(8, 3, dtype=torch.int32)
    codes[7] = torch.tensor([15, 8, 7])  # 15 and 8 set bit 31
    packed = pack_codes(codes)
    assert packed[0, 0] < 0 and packed[0, 1] < 0 and packed[0, 2] > 0
    assert torch.equal(unpack(packed), codes)
    scales = torch.ones(1, 3, dtype=torch.float16)
    w = dequantize(packed, scales, group_size=8)
    assert w[7].tolist() == [7.0, 0.0, -1.0]
    assert w[:7].eq(-8).all()


@pytest.mark.parametrize("group_size", [32, 64, 128])
def test_quantize_dequantize_round_trip(group_size):
    torch.manual_seed(0)
    k, n = 256, 40
    w = torch.randn(k, n)
    packed, scales = quantize_pack(w, group_size)
    assert packed.shape == (k // 8, n) and packed.dtype == torch.int32
    assert scales.shape == (k // group_size, n) and scales.dtype == torch.float16
    deq = dequantize(packed, scales, group_size)
    assert deq.dtype == torch.float16 and deq.shape == (k, n)
    step = scales.float().repeat_interleave(group_size, 0)
    assert ((deq.float() - w).abs() <= step * 0.5 + 1e-3).all()
    # re-quantizing the dequantized weights reproduces the codes exactly (the scales may move
    # by an fp16 ulp, since 7 * s is itself rounded to fp16)
    packed2, scales2 = quantize_pack(deq.float(), group_size)
    assert torch.equal(unpack(packed2), unpack(packed))
    assert torch.allclose(scales2.float(), scales.float(), rtol=2e-3, atol=0)


def test_zero_group_and_extremes():
    w = torch.zeros(128, 4)
    w[:, 1] = 1.0
    w[5, 2] = -3.0
    packed, scales = quantize_pack(w, 128)
    deq = dequantize(packed, scales, 128).float()
    assert deq[:, 0].eq(0).all()
    assert torch.allclose(deq[:, 1], torch.ones(128), rtol=1e-3)
    assert deq[5, 2].item() == pytest.approx(-3.0, rel=1e-3)


@pytest.mark.parametrize("bad, message", [
    (torch.randn(100, 8), "multiple of 8"),
    (torch.randn(192, 8), "multiple of group_size"),
    (torch.randn(128), "2-D"),
    (torch.randint(0, 3, (128, 8)), "floating-point"),
    (torch.full((128, 8), float("nan")), "non-finite"),
])
def test_quantize_rejects_bad_weights(bad, message):
    with pytest.raises(ValueError, match=message):
        quantize_pack(bad, 128)


def test_quantize_rejects_bad_group_size():
    with pytest.raises(ValueError, match="group_size"):
        quantize_pack(torch.randn(128, 8), 12)


def test_dequantize_rejects_mismatches():
    packed, scales = quantize_pack(torch.randn(256, 8), 128)
    with pytest.raises(ValueError, match="scales must be"):
        dequantize(packed, scales[:1], 128)
    with pytest.raises(ValueError, match="int32"):
        dequantize(packed.long(), scales, 128)
    with pytest.raises(ValueError, match="float16"):
        dequantize(packed, scales.float(), 128)
    with pytest.raises(ValueError, match="on"):
        dequantize(packed, scales.to("meta"), 128)


def test_pack_linear_uses_the_transposed_weight():
    torch.manual_seed(1)
    linear = torch.nn.Linear(256, 24, bias=False)
    packed, scales = pack_linear(linear, 128)
    assert packed.shape == (32, 24)
    deq = dequantize(packed, scales, 128).float()
    step = scales.float().repeat_interleave(128, 0)
    assert ((deq - linear.weight.detach().t()).abs() <= step * 0.5 + 1e-4).all()
    with pytest.raises(ValueError, match="Linear"):
        pack_linear(torch.nn.Conv1d(1, 1, 1))


# -- layout frag32 ---------------------------------------------------------------------------------

def test_frag32_layout_is_the_register_fragments_k_order():
    """Word t of each column's 32-deep chunk holds the k that thread t of a quad holds in the wgmma's
    register operand, k = 2t, 2t+1, 2t+8, 2t+9 of each 16-deep step, pair i at nibble positions i and
    i + 4; a column pair's words are adjacent (offset 8p + 2t + h for column 2p + h). Written out by hand
    here, then the packer and unpacker (the specification) checked against it and each other."""
    from tunesearch.variants.layout import frag32_k, pack_frag32, unpack_frag32

    fragment = [[0, 8, 16, 24, 1, 9, 17, 25], [2, 10, 18, 26, 3, 11, 19, 27],
                [4, 12, 20, 28, 5, 13, 21, 29], [6, 14, 22, 30, 7, 15, 23, 31]]
    assert frag32_k().tolist() == fragment
    packed, _ = quantize_pack(torch.randn(256, 24, generator=torch.Generator().manual_seed(0)), 128)
    codes = unpack(packed)
    packed_f = pack_frag32(packed)
    assert packed_f.shape == (256 // 32, 4 * 24) and packed_f.dtype == torch.int32
    assert torch.equal(unpack_frag32(packed_f), codes)
    for c, n, t in [(0, 0, 0), (3, 5, 1), (7, 23, 3), (2, 10, 2)]:  # a word's nibbles, one by one
        word = int(packed_f[c, 8 * (n // 2) + 2 * t + n % 2]) & 0xFFFFFFFF
        assert [(word >> 4 * p) & 0xF for p in range(8)] == [int(codes[32 * c + k, n]) for k in fragment[t]]


@settings(max_examples=20, deadline=None)
@given(chunks=st.integers(1, 5), pairs=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_frag32_round_trips_and_dequantizes_as_the_base_layout(chunks, pairs, seed):
    from tunesearch.variants.layout import check_packed, layout_of, to_layout, unpack_frag32

    gen = torch.Generator().manual_seed(seed)
    k, n = 32 * chunks, 2 * pairs
    codes = torch.randint(0, 16, (k, n), generator=gen, dtype=torch.int32)
    packed = pack_codes(codes)
    scales = (torch.rand(k // 32, n, generator=gen) + 0.5).half()
    packed_f = to_layout(packed, "frag32")
    assert torch.equal(unpack_frag32(packed_f), codes)
    assert layout_of(packed, scales) == "base" and layout_of(packed_f, scales) == "frag32"
    assert check_packed(packed_f, scales, 32) == check_packed(packed, scales, 32) == (k, n)
    assert torch.equal(dequantize(packed_f, scales, 32), dequantize(packed, scales, 32))
    assert to_layout(packed, "base") is packed
    assert torch.equal(layout.to_base(packed_f, scales), packed) and layout.to_base(packed, scales) is packed
    # the operands the compile pool builds its kernels for (tunesearch.compile.compile_one)
    from tunesearch.compile import empty_operands

    for name, words in (("base", packed), ("frag32", packed_f)):
        assert layout.packed_shape(k, n, name) == tuple(words.shape)
        a, p, s, out = empty_operands(3, n, k, 32, name, device="cpu")
        assert layout_of(p, s) == name and check_packed(p, s, 32) == (k, n)
        assert (a.shape, out.shape, p.dtype, s.dtype) == ((3, k), (3, n), torch.int32, torch.float16)


def test_frag32_refuses_what_it_cannot_hold():
    from tunesearch.variants.layout import check_packed, pack_frag32, to_layout

    with pytest.raises(ValueError, match="multiple of 32"):
        pack_frag32(torch.zeros(2, 4, dtype=torch.int32))  # K = 16
    with pytest.raises(ValueError, match="N even"):
        pack_frag32(torch.zeros(4, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match="unknown weight layout 'k16'"):
        to_layout(torch.zeros(4, 4, dtype=torch.int32), "k16")
    with pytest.raises(ValueError, match="unknown weight layout 'k16'"):
        layout.packed_shape(128, 4, "k16")
    with pytest.raises(ValueError, match="scales must be"):  # frag32 words for K=64, scales for another K
        check_packed(torch.zeros(2, 16, dtype=torch.int32), torch.ones(1, 4, dtype=torch.float16), 32)
