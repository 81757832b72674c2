import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tunesearch.variants import dequantize, pack_linear, quantize_pack, unpack


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
