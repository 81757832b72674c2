"""The exported table on the GPU: correct for llama-7b shapes over M in 1..4096, capturable in a
CUDA graph, compilable. TUNESEARCH_DISPATCH names the table (default: the packaged tables)."""
import os

import pytest
import torch

from tunesearch import load_dispatch
from tunesearch.bench import relative_error
from tunesearch.shapes import parse_shapes
from tunesearch.variants import dequantize, matmul, quantize_pack

MS = [1, 2, 3, 5, 8, 13, 16, 24, 33, 100, 200, 255, 513, 1000, 1025, 4096]  # 513, 1025: several launches


def fresh_dispatch(**options):
    """A dispatcher of its own on the table under test. A dispatcher fixes a key's plan at its first call, so
    a test that sets a module setting (CONCURRENT) before calling needs one made after."""
    return load_dispatch(os.environ.get("TUNESEARCH_DISPATCH") or None, **options)


@pytest.fixture(scope="module")
def mm():
    mm = fresh_dispatch()
    mm.warmup(parse_shapes("llama-7b"), max_m=4096)
    return mm


@pytest.mark.gpu
@pytest.mark.parametrize("K,N", parse_shapes("llama-7b"))
def test_dispatch_matches_reference_for_every_m(mm, K, N):
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    w = dequantize(packed, scales, 128).float()
    prepared = mm.prepare(packed, scales)  # in the layout the table keeps this shape in
    for M in MS:
        a = torch.randn(M, K, device="cuda").half()
        for weights in dict.fromkeys((prepared, packed), None):  # and base-layout weights, if not the same
            err = relative_error(mm(a, weights, scales), a.float() @ w)
            assert err < 2e-3, f"K={K} N={N} M={M} {tuple(weights.shape)}: error {err:.3g}"


@pytest.mark.gpu
def test_dispatch_in_a_cuda_graph_and_torch_compile(mm):
    K, N = 4096, 11008
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    packed = mm.prepare(packed, scales)
    for M in (1, 16, 256):
        a = torch.randn(M, K, device="cuda").half()
        eager = mm.op(a, packed, scales)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = mm.op(a, packed, scales)
        a.copy_(torch.randn_like(a))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, mm(a, packed, scales))
        assert not torch.equal(captured, eager)
    compiled = torch.compile(lambda x: mm.op(x, packed, scales), fullgraph=True)
    a = torch.randn(4, K, device="cuda").half()
    assert torch.equal(compiled(a), mm(a, packed, scales))


@pytest.mark.gpu
def test_the_activations_gradient_on_the_gpu_also_compiled(mm):
    K, N = 4096, 11008
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    packed = mm.prepare(packed, scales)
    w = dequantize(packed, scales, 128).float()
    compiled = torch.compile(lambda x, packed, scales: mm.op(x, packed, scales), fullgraph=True)
    for call in (mm, mm.op, compiled):
        for M in (1, 16, 257):  # 257: a split plan's launches
            a = (torch.randn(M, K, device="cuda") / 8).half().requires_grad_()
            grad = torch.randn(M, N, device="cuda").half()
            out = call(a, packed, scales)
            assert torch.equal(out.detach(), mm(a.detach(), packed, scales))  # the kernels' bits forward
            out.backward(grad)
            assert relative_error(a.grad, grad.float() @ w.t()) < 2e-3, (call, M)


@pytest.mark.gpu
def test_m_just_past_a_bucket_runs_as_several_launches_with_the_bits_of_each(mm):
    # the packaged table: M=1025 on 4096x22016 as 768 + 2 + 255 (three launches, NOTES.md row 116; two, 2 +
    # 1023, before; 310 us whole once)
    K, N, M = 4096, 22016, 1025
    parts = mm.plan(M, N, K, torch.device("cuda"))
    if len(parts) < 2:
        assert os.environ.get("TUNESEARCH_DISPATCH"), "the packaged table splits M=1025 on 4096x22016"
        pytest.skip(f"this table runs M={M} on {K}x{N} as one launch")
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    w = dequantize(packed, scales, 128).float()
    packed = mm.prepare(packed, scales)
    a = torch.randn(M, K, device="cuda").half()
    out = mm(a, packed, scales)
    starts = [sum(rows for rows, _ in parts[:i]) for i in range(len(parts) + 1)]
    apart = [mm(a[lo:hi], packed, scales) for lo, hi in zip(starts, starts[1:])]
    assert torch.equal(out, torch.cat(apart))
    assert relative_error(out, a.float() @ w) < 2e-3


def one_launch_at_a_time(plan, a, packed, scales):
    """A plan's launches ([(rows, variant)], ``Dispatcher.plan``) run one after another on the current
    stream, each its variant on its own rows of A: the bits running them side by side must give. (Not the
    dispatch with CONCURRENT off: its serial rule may plan other launches, as the H100 table does at
    4096x12288 M=257, 144 + 113 against 2 + 255 side by side.)"""
    assert all(variant is not None for _, variant in plan), f"a launch of {plan} is not a kernel of ours"
    starts = [0]
    for rows, _ in plan:
        starts.append(starts[-1] + rows)
    return torch.cat([matmul(a[s:s + rows], packed, scales, variant, 128) for s, (rows, variant) in zip(starts, plan)])


@pytest.mark.gpu
@pytest.mark.parametrize("K,N,M", [(4096, 22016, 1025), (4096, 4096, 1100), (4096, 12288, 257)])
def test_concurrent_launches_give_the_serial_bits_eagerly_and_in_a_cuda_graph(monkeypatch, K, N, M):
    from tunesearch import dispatch

    cuda = torch.device("cuda")
    monkeypatch.setattr(dispatch, "CONCURRENT", True)  # every split call
    mm = fresh_dispatch()
    captured_plan, eager_plan = mm.plan(M, N, K, cuda), mm.plan(M, N, K, cuda, eager=True)
    if len(captured_plan) < 2:
        pytest.skip(f"this table runs M={M} on {K}x{N} as one launch")
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    packed = mm.prepare(packed, scales)
    a = torch.randn(M, K, device="cuda").half()
    assert torch.equal(mm(a, packed, scales), one_launch_at_a_time(eager_plan, a, packed, scales))
    serial = one_launch_at_a_time(captured_plan, a, packed, scales)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = mm(a, packed, scales)
    captured.fill_(float("nan"))  # every row written again by the replay
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, serial)
    later = torch.randn_like(a)  # the replay reads A where it was captured, after the side streams waited
    a.copy_(later)
    graph.replay()
    assert torch.equal(captured, one_launch_at_a_time(captured_plan, later, packed, scales))


@pytest.mark.gpu
def test_auto_runs_side_by_side_in_a_capture_and_eagerly_only_past_the_eager_bar(monkeypatch):
    from tunesearch import dispatch

    # 4096x12288: M=257 (2 + 255, 53.8 us serial by the H200 table) is host-bound eagerly; M=1300 (191 us) is not
    K, N = 4096, 12288
    cuda = torch.device("cuda")
    monkeypatch.setattr(dispatch, "CONCURRENT", "auto")
    mm = fresh_dispatch()
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    packed = mm.prepare(packed, scales)
    side, real = [], dispatch._run_side_by_side
    monkeypatch.setattr(dispatch, "_run_side_by_side",
                        lambda spans, *args: (side.append(len(spans)), real(spans, *args))[1])
    for M, eager in ((257, False), (1300, True)):
        assert mm.side_by_side(M, N, K, cuda), f"the rule puts M={M} on {K}x{N} side by side"
        a = torch.randn(M, K, device="cuda").half()
        side.clear()
        out = mm(a, packed, scales)
        assert side == ([2] if eager else [])
        assert torch.equal(out, one_launch_at_a_time(mm.plan(M, N, K, cuda, eager=True), a, packed, scales))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = mm(a, packed, scales)
        assert side[-1:] == [2]  # captured side by side
        captured.fill_(float("nan"))  # every row written again by the replay
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(captured, one_launch_at_a_time(mm.plan(M, N, K, cuda), a, packed, scales))


@pytest.mark.gpu
def test_overlap_pricing_gives_a_capture_its_side_by_side_plan_and_an_eager_call_its_serial_one(monkeypatch):
    from tunesearch import dispatch

    # OVERLAP_PRICE (on, its plans the export's): 4096x11008 M=257 as 256 + 1 side by side in a capture;
    # eagerly it would run serial (53 us by the table, under the eager bar), so there M=257's own pick, whole
    monkeypatch.setattr(dispatch, "CONCURRENT", "auto")
    mm = fresh_dispatch()
    K, N, M = 4096, 11008, 257
    cuda = torch.device("cuda")
    settings = dispatch.side_by_side_settings(torch.cuda.get_device_properties(0).multi_processor_count)
    if not os.environ.get("TUNESEARCH_DISPATCH") and settings["num_sms"] == 132:  # an H100 or H200
        assert mm._shape_table(N, K, cuda).planned(M, False, settings) == (256, 1)  # the packaged table's plan
    captured_plan, eager_plan = mm.plan(M, N, K, cuda), mm.plan(M, N, K, cuda, eager=True)
    if [r for r, _ in captured_plan] != [256, 1] or len(eager_plan) != 1:
        assert os.environ.get("TUNESEARCH_DISPATCH"), "the packaged table prices M=257 on 4096x11008 so"
        pytest.skip(f"this table plans M={M} on {K}x{N} as {captured_plan} and {eager_plan}")
    packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
    w = dequantize(packed, scales, 128).float()
    packed = mm.prepare(packed, scales)
    side, real = [], dispatch._run_side_by_side
    monkeypatch.setattr(dispatch, "_run_side_by_side",
                        lambda spans, *args: (side.append(len(spans)), real(spans, *args))[1])
    a = torch.randn(M, K, device="cuda").half()
    eager = mm(a, packed, scales)
    assert side == []
    whole = fresh_dispatch(split=False)
    assert torch.equal(eager, whole(a, packed, scales))  # the one launch of M's own pick
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = mm(a, packed, scales)
    assert side == [2]
    captured.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, torch.cat([mm(a[:256], packed, scales), mm(a[256:], packed, scales)]))
    assert relative_error(captured, a.float() @ w) < 2e-3
