"""W4A16Linear, quantize_model and the logit check on a small random Llama (CPU)."""
import logging

import pytest
import torch
from torch import nn

from tunesearch.nn import W4A16Linear, dequantized_reference, layer_shapes, quantize_model
from tunesearch.variants import dequantize

transformers = pytest.importorskip("transformers")


def test_w4a16_linear_matches_its_dequantized_weights_and_saves():
    torch.manual_seed(0)
    linear = nn.Linear(256, 40, bias=True)
    layer = W4A16Linear.from_linear(linear, group_size=128)
    x = torch.randn(2, 3, 256).half()
    want = x.float() @ dequantize(layer.packed, layer.scales, 128).float() + layer.bias.float()
    got = layer(x)
    assert got.shape == (2, 3, 40) and got.dtype == torch.float16
    assert (got.float() - want).abs().max() < 2e-3 * want.abs().max()
    clone = W4A16Linear(256, 40, bias=True, group_size=128)
    clone.load_state_dict(layer.state_dict())
    assert torch.equal(clone(x), got)
    assert set(layer.state_dict()) == {"packed", "scales", "bias"}
    assert "group_size=128" in repr(layer)
    assert layer(x[:, :0]).shape == (2, 0, 40)  # no tokens, as nn.Linear
    with pytest.raises(ValueError, match="features"):
        layer(torch.randn(2, 100).half())
    with pytest.raises(ValueError, match="float16 input, got torch.bfloat16.*model.half"):
        layer(x.bfloat16())
    with pytest.raises(ValueError, match="multiple"):
        W4A16Linear(100, 8, group_size=128)


def test_quantize_model_replaces_linears_but_skipped_ones():
    from tunesearch.model_check import tiny_llama

    model = tiny_llama()
    quantize_model(model)
    kinds = {name: type(m).__name__ for name, m in model.named_modules() if isinstance(m, (nn.Linear, W4A16Linear))}
    assert kinds["lm_head"] == "Linear"
    assert kinds["model.layers.0.self_attn.q_proj"] == "W4A16Linear"
    assert kinds["model.layers.1.mlp.down_proj"] == "W4A16Linear"
    assert sum(k == "W4A16Linear" for k in kinds.values()) == 2 * 7
    with pytest.raises(ValueError, match="no nn.Linear"):
        quantize_model(nn.Sequential(nn.ReLU()))


def test_an_adapter_before_a_quantized_layer_trains_as_with_the_reference(kernel_device):
    # a trainable layer feeding a W4A16 one (an adapter on a quantized model) gets the gradient that
    # dequantize-then-matmul gives it; before, the table's kernels cut autograd's graph and it got none
    from tunesearch import load_dispatch

    torch.manual_seed(0)
    adapter, frozen = nn.Linear(128, 128).to(kernel_device), nn.Linear(128, 64).to(kernel_device)
    x = torch.randn(5, 128, device=kernel_device)
    grads = []
    for mm in (None, load_dispatch()):
        model = nn.Sequential(adapter, W4A16Linear.from_linear(frozen, 128, mm))
        adapter.zero_grad()
        model[1](model[0](x).half()).float().square().sum().backward()
        grads.append(adapter.weight.grad.clone())
    reference, tuned = grads
    assert reference.abs().max() > 0
    assert (tuned - reference).abs().max() < 5e-3 * reference.abs().max()


def test_layer_shapes_are_the_quantized_layers_and_the_configs_unfused_shapes(tmp_path):
    from tunesearch.model_check import tiny_llama
    from tunesearch.shapes import parse_shapes

    model = tiny_llama()
    assert layer_shapes(model) == []
    quantize_model(model)
    # q and o, k and v (grouped: 2 heads of 32), gate and up, down; lm_head stays fp16
    assert layer_shapes(model) == [(128, 128), (128, 64), (128, 256), (256, 128)]
    # what `sweep --shapes FOLDER` tunes: these, and fused gate+up (fused qkv, 128 + 2 x 64, is gate/up's shape)
    model.config.to_json_file(tmp_path / "config.json")
    assert parse_shapes(str(tmp_path)) == layer_shapes(model) + [(128, 512)]


@pytest.fixture(scope="module")
def llama():
    from tunesearch.model_check import tiny_llama

    return tiny_llama(), torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))


def test_logit_check_passes_through_the_dispatch_path(llama, kernel_device, caplog):
    from tunesearch import load_dispatch
    from tunesearch.model_check import logit_check

    model, ids = llama
    mm = load_dispatch()  # the packaged table: interpreter kernels on CPU, or the GPU's table
    model, ids = model.to(kernel_device), ids.to(kernel_device)
    with caplog.at_level(logging.INFO, logger="tunesearch"):
        result = logit_check(model, ids, dispatch=mm)
    assert result.passed, result
    assert result.top1_agreement >= 0.95 and result.max_rel < 2e-2


def test_logit_check_fails_on_a_mis_packed_layer(llama):
    from tunesearch.model_check import logit_check

    model, ids = llama

    def swap_nibble_halves(quantized):
        layer = quantized.model.layers[0].mlp.up_proj
        p = layer.packed
        # the two 16-bit halves swapped: k and k+4 exchanged within every int32 (a layout mismatch)
        layer.packed.copy_(((p << 16) | ((p >> 16) & 0xFFFF)).to(torch.int32))

    good = logit_check(model, ids)
    bad = logit_check(model, ids, corrupt=swap_nibble_halves)
    assert good.passed and not bad.passed
    assert bad.max_rel > 10 * good.max_rel


def test_reference_model_holds_spec_dequantized_weights(llama):
    model, _ = llama
    ref = dequantized_reference(model)
    w = ref.model.layers[0].self_attn.q_proj.weight
    orig = model.model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(w, orig)
    assert (w.float() - orig.float()).abs().max() < orig.float().abs().max() / 7
    assert torch.equal(ref.lm_head.weight, model.lm_head.weight)


def test_check_model_command(kernel_device):
    """The CLI entry: a passing check prints its JSON and exits 0; bad flags exit 2 with one line."""
    import json

    from typer.testing import CliRunner

    from tunesearch.cli import app

    r = CliRunner().invoke(app, ["check-model", "--device", "cpu", "--kv-heads", "4", "--tokens", "8"])
    assert r.exit_code == 0, r.output
    result = json.loads(r.output.strip().splitlines()[-1])
    assert result["passed"] and result["top1_agreement"] == 1.0 and result["tokens"] == 8
    r = CliRunner().invoke(app, ["check-model", "--device", "cpu", "--kv-heads", "3"])
    assert r.exit_code == 2 and "--kv-heads 3 must be >= 1 and divide --heads 4" in r.output


def _table_keeping(layout: str):
    """A dispatcher whose table keeps 256x72 in ``layout`` (its one bucket: a dequant pick, which reads both)."""
    from tunesearch.dispatch import Dispatcher
    from tunesearch.export import SCHEMA
    from tunesearch.variants import Variant

    bucket = {"m_max": 64, "variant": Variant.from_id("dequant.bk32.bn64.w4").to_dict(), "us": 1.0}
    shape = {"n": 72, "k": 256, "group_size": 128, "layout": layout, "buckets": [bucket]}
    gpu = {"name": "test", "capability": "0.0", "versions": {}, "shapes": {"256x72": shape}}
    return Dispatcher({"schema": SCHEMA, "gpus": {"test": gpu}}, group_size=128)


def test_a_saved_layer_loads_into_a_fresh_one_in_whichever_layout_either_table_keeps():
    from tunesearch.variants.layout import layout_of

    torch.manual_seed(1)
    linear = nn.Linear(256, 72, bias=False)
    frag32, base = _table_keeping("frag32"), _table_keeping("base")
    saved = W4A16Linear.from_linear(linear, 128, frag32)
    assert layout_of(saved.packed, saved.scales) == "frag32"
    weight = saved.dequantized_weight()
    # a checkpoint saved with one GPU's table: into a fresh layer with none (kept as saved), with a table
    # keeping base (converted), and back into frag32 from a base checkpoint
    for mm, layout in ((None, "frag32"), (base, "base"), (frag32, "frag32")):
        fresh = W4A16Linear(256, 72, bias=False, mm=mm)
        fresh.load_state_dict(saved.state_dict())
        assert layout_of(fresh.packed, fresh.scales) == layout and torch.equal(fresh.dequantized_weight(), weight)
        saved = fresh
    x = torch.randn(3, 256).half()
    want = x.float() @ weight.t().float()
    assert (saved(x).float() - want).abs().max() < 2e-3 * want.abs().max()
    # a packed tensor of neither layout's shape is still refused, as a plain buffer would be
    wrong = dict(saved.state_dict(), packed=torch.zeros(16, 72, dtype=torch.int32))
    with pytest.raises(RuntimeError, match="size mismatch"):
        W4A16Linear(256, 72, bias=False).load_state_dict(wrong)


def test_a_layer_of_another_group_size_than_the_table_keeps_base_and_runs_the_reference():
    from tunesearch.variants.layout import layout_of

    torch.manual_seed(2)
    linear = nn.Linear(256, 72, bias=False)
    frag32 = _table_keeping("frag32")  # group size 128
    layer = W4A16Linear.from_linear(linear, 64, frag32)
    assert layout_of(layer.packed, layer.scales) == "base" and layer.scales.shape == (4, 72)
    layer.mm = None  # the same layer run by the reference alone: the dispatcher must not have been called
    x = torch.randn(3, 256).half()
    want = layer(x)
    layer.mm = frag32
    frag32._call = None  # any call into the dispatcher would now raise
    assert torch.equal(layer(x), want)
    fresh = W4A16Linear(256, 72, bias=False, group_size=64, mm=frag32)
    fresh.load_state_dict(layer.state_dict())
    assert layout_of(fresh.packed, fresh.scales) == "base" and torch.equal(fresh(x), want)


@pytest.mark.gpu
def test_quantize_model_on_a_gpu_without_a_table_says_its_layers_run_the_reference(caplog):
    from tunesearch import load_dispatch

    model = nn.Sequential(nn.Linear(256, 64)).half().cuda()
    with caplog.at_level(logging.WARNING, logger="tunesearch"):
        quantize_model(model)
    assert "without a dispatch table" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tunesearch"):
        quantize_model(nn.Sequential(nn.Linear(256, 64)).half().cuda(), dispatch=load_dispatch())
    assert "without a dispatch table" not in caplog.text
