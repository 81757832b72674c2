"""Random shapes, strides, dtypes, group sizes and variants through the public entry: valid
input gives the right answer, anything else a ValueError; never a wrong result or another error."""
import itertools

import torch
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from tunesearch.variants import Variant, dequantize, matmul, quantize_pack, unpack, variant_space
from tunesearch.variants.space import FAMILY_GRID, FAMILY_PARAMS

ANY_VARIANT = [Variant(f, dict(zip(FAMILY_GRID[f], values)))
               for f in FAMILY_PARAMS for values in itertools.product(*FAMILY_GRID[f].values())]


@st.composite
def problems(draw):
    M, N = draw(st.integers(1, 40)), draw(st.integers(1, 96))
    K = draw(st.sampled_from([64, 128, 192, 256]))
    G = draw(st.sampled_from([g for g in (32, 64, 128) if K % g == 0]))
    valid = draw(st.booleans())
    if valid:
        return dict(M=M, N=N, K=K, G=G, G_call=G, dtype=torch.float16,
                    a_layout=draw(st.sampled_from(["contiguous", "transposed", "strided"])),
                    w_layout="contiguous", variant=draw(st.sampled_from(variant_space(M, N, K, G))),
                    seed=draw(st.integers(0, 2**31 - 1)), valid=True)
    return dict(M=M, N=N, K=K, G=G, G_call=draw(st.sampled_from([G, 32, 64, 96, 128])),
                dtype=draw(st.sampled_from([torch.float16, torch.float32, torch.bfloat16])),
                a_layout=draw(st.sampled_from(["contiguous", "strided", "wrong_k", "1d"])),
                w_layout=draw(st.sampled_from(["contiguous", "transposed_packed", "int64", "scales32"])),
                variant=draw(st.sampled_from(ANY_VARIANT)), seed=draw(st.integers(0, 2**31 - 1)),
                valid=False)


def operands(p):
    gen = torch.Generator().manual_seed(p["seed"])
    packed, scales = quantize_pack(torch.randn(p["K"], p["N"], generator=gen), p["G"])
    a = torch.randn(p["M"], p["K"], generator=gen).to(p["dtype"])
    ref = a.float() @ dequantize(packed, scales, p["G"]).float()
    layout = p["a_layout"]
    if layout == "transposed":
        a = a.t().contiguous().t()
    elif layout == "strided":  # rows 2K apart: a view, not contiguous
        a = torch.cat([a, a], dim=1)[:, : p["K"]]
    elif layout == "wrong_k":
        a = a[:, : p["K"] // 2]
    elif layout == "1d":
        a = a[0]
    if p["w_layout"] == "transposed_packed":
        packed = packed.t().contiguous().t()
    elif p["w_layout"] == "int64":
        packed = packed.long()
    elif p["w_layout"] == "scales32":
        scales = scales.float()
    return a, packed, scales, ref


def error_bound(a, packed, scales, group_size, ref):
    """Elementwise: how far a correct kernel may be from ``ref``. The reference multiplies the spec's
    fp16 weights, each rounded from (q - 8) s; a kernel that applies s to the fp32 sum of a (q - 8)
    lands within fp16 output rounding (2^-11) and fp32 accumulation of the exact value instead. So
    the bound is the reference's own measured distance from the exact value plus those two. (A bound
    on max |ref| alone failed a correct kernel where an output cancelled to 0.54 from terms summing
    to 71: the reference was 0.004 off the exact value, the kernel within rounding of it.)"""
    w = (unpack(packed).double() - 8) * scales.double().repeat_interleave(group_size, dim=0)
    exact = a.double() @ w
    terms = a.double().abs() @ w.abs()
    k = a.shape[-1]
    return ((exact - ref.double()).abs() + 2.0 ** -11 * exact.abs() + k * 2.0 ** -23 * terms + 1e-7).float()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(problems())
# found by CI: one output of 128 terms summing to 0.54 (sum |a||w| = 71); the kernel is within fp16
# rounding of the exact value, the reference (fp16 weights) 0.004 away
@example(dict(M=1, N=1, K=128, G=32, G_call=32, dtype=torch.float16, a_layout="contiguous",
              w_layout="contiguous", variant=Variant.from_id("gemv.bm1.bn64.bk32.sk1.w2.s1"),
              seed=106741, valid=True))
def test_matmul_is_right_or_refuses(kernel_device, p):
    a, packed, scales, ref = operands(p)
    dev = kernel_device
    try:
        out = matmul(a.to(dev), packed.to(dev), scales.to(dev), p["variant"], p["G_call"])
    except ValueError as exc:
        event("refused")
        assert not p["valid"], f"valid input refused: {exc}"
        assert str(exc)
        return
    event("accepted")
    out = out.float().cpu()
    assert out.shape == ref.shape and torch.isfinite(out).all()
    assert ((out - ref).abs() <= error_bound(a, packed, scales, p["G"], ref)).all()
