"""GPTQ checkpoints: a symmetric 4-bit layer in group order is the base layout as stored; the others are
refused with the reason. The GPTQ side is written here from AutoGPTQ's own packer and dequantizer
(``qlinear_cuda_old``: the zero points stored minus one), not from this package's layout code."""
import numpy as np
import pytest
import torch
from torch import nn

from tunesearch.nn import W4A16Linear, dequantized_reference, load_gptq
from tunesearch.variants import dequantize
from tunesearch.variants.gptq import from_gptq, zero_points

transformers = pytest.importorskip("transformers")


def gptq_pack(codes: np.ndarray, zeros: np.ndarray, v2: bool = False):
    """AutoGPTQ's pack: codes [K, N] eight a word along K; zeros [K/G, N] eight a word along N, minus one."""
    K, N = codes.shape
    qweight = np.zeros((K // 8, N), dtype=np.uint32)
    for row in range(K // 8):
        for j in range(8):
            qweight[row] |= codes[8 * row + j].astype(np.uint32) << (4 * j)
    stored = (zeros - (0 if v2 else 1)).astype(np.uint32)
    qzeros = np.zeros((zeros.shape[0], N // 8), dtype=np.uint32)
    for col in range(N // 8):
        for j in range(8):
            qzeros[:, col] |= stored[:, 8 * col + j] << (4 * j)
    return torch.from_numpy(qweight.astype(np.int32)), torch.from_numpy(qzeros.astype(np.int32))


def gptq_dequantize(qweight, qzeros, scales, group_size):
    """AutoGPTQ's torch path: w = scales * (q - (stored zero + 1)), in fp16."""
    wf = torch.arange(0, 32, 4, dtype=torch.int32)[None, :]
    zeros = (torch.bitwise_right_shift(qzeros[:, :, None].expand(-1, -1, 8), wf[None]).to(torch.int8) & 15) + 1
    zeros = zeros.reshape(-1, 1, zeros.shape[1] * 8)
    weight = torch.bitwise_right_shift(qweight[:, None, :].expand(-1, 8, -1), wf[..., None]).to(torch.int8) & 15
    weight = weight.reshape(-1, group_size, weight.shape[2])
    return (scales.reshape(-1, 1, scales.shape[-1]) * (weight - zeros)).reshape(-1, scales.shape[-1])


def symmetric_layer(K=256, N=48, G=128, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 16, size=(K, N))
    scales = torch.from_numpy(rng.uniform(1e-3, 2e-2, size=(K // G, N))).half()
    qweight, qzeros = gptq_pack(codes, np.full((K // G, N), 8))
    return qweight, qzeros, scales


def test_a_symmetric_layer_is_the_base_layout_as_stored():
    qweight, qzeros, scales = symmetric_layer()
    packed, ours = from_gptq(qweight, qzeros, scales, torch.arange(256, dtype=torch.int32) // 128)
    assert torch.equal(packed, qweight) and torch.equal(ours, scales)
    assert torch.equal(dequantize(packed, ours, 128), gptq_dequantize(qweight, qzeros, scales, 128))


def test_v2_checkpoints_store_the_zero_point_itself():
    rng = np.random.default_rng(1)
    qweight, qzeros = gptq_pack(rng.integers(0, 16, size=(128, 16)), np.full((1, 16), 8), v2=True)
    assert torch.equal(zero_points(qzeros, "gptq_v2"), torch.full((1, 16), 8, dtype=torch.int32))
    scales = torch.full((1, 16), 0.01).half()
    with pytest.raises(ValueError, match="checkpoint_format='gptq_v2'"):  # read as v1: every zero 9
        from_gptq(qweight, qzeros, scales)
    assert torch.equal(from_gptq(qweight, qzeros, scales, checkpoint_format="gptq_v2")[0], qweight)


@pytest.mark.parametrize("change, message", [
    ("asymmetric", "asymmetric"),
    ("act_order", "activation order"),
    ("bits", "4-bit"),
    ("zeros_shape", "qzeros must be"),
    ("scale_groups", "do not divide"),
    ("format", "checkpoint_format"),
])
def test_what_the_kernels_cannot_compute_is_refused_with_the_reason(change, message):
    qweight, qzeros, scales = symmetric_layer()
    kwargs = {}
    g_idx = None
    if change == "asymmetric":
        zeros = np.full((2, 48), 8)
        zeros[1, 5] = 3
        qweight, qzeros = gptq_pack(np.zeros((256, 48), dtype=np.int64), zeros)
    elif change == "act_order":
        g_idx = (torch.arange(256, dtype=torch.int32) // 128).flip(0)
    elif change == "bits":
        kwargs["bits"] = 8
    elif change == "zeros_shape":
        qzeros = qzeros[:, :3]
    elif change == "scale_groups":
        scales = torch.ones(3, 48).half()
    else:
        kwargs["checkpoint_format"] = "awq"
    with pytest.raises(ValueError, match=message):
        from_gptq(qweight, qzeros, scales, g_idx, **kwargs)


def gptq_state_dict(model, skip=("lm_head",)):
    """``model``'s state dict with its linears (but ``skip``) as a symmetric GPTQ checkpoint stores them,
    and the model holding the weights that checkpoint means (dequantized)."""
    from tunesearch.variants import quantize_pack
    from tunesearch.variants.layout import unpack

    state = dict(model.state_dict())
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name not in skip:
            packed, scales = quantize_pack(module.weight.detach().t().float(), 128)
            qweight, qzeros = gptq_pack(unpack(packed).cpu().numpy(), np.full(scales.shape, 8))
            del state[f"{name}.weight"]
            device = packed.device
            state |= {f"{name}.qweight": qweight.to(device), f"{name}.qzeros": qzeros.to(device),
                      f"{name}.scales": scales,
                      f"{name}.g_idx": torch.arange(packed.shape[0] * 8, dtype=torch.int32, device=device) // 128}
    return state


def test_a_gptq_llama_loads_and_computes_what_its_dequantized_weights_compute(kernel_device):
    from tunesearch import load_dispatch
    from tunesearch.model_check import tiny_llama

    source = tiny_llama().to(kernel_device)
    checkpoint = gptq_state_dict(source)
    model = load_gptq(tiny_llama(seed=7).to(kernel_device), checkpoint, load_dispatch())
    assert isinstance(model.model.layers[0].mlp.down_proj, W4A16Linear)
    assert isinstance(model.lm_head, nn.Linear) and not isinstance(model.lm_head, W4A16Linear)
    want = dequantized_reference(source)  # quantize_pack's weights, which the checkpoint holds
    tokens = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(3)).to(kernel_device)
    with torch.no_grad():
        got, ref = model(tokens).logits.float(), want(tokens).logits.float()
    assert (got - ref).abs().max() < 2e-2 * ref.abs().max()


def test_a_checkpoint_that_does_not_fit_the_model_is_named():
    from tunesearch.model_check import tiny_llama

    checkpoint = gptq_state_dict(tiny_llama())
    with pytest.raises(ValueError, match="no GPTQ layer"):
        load_gptq(tiny_llama(), tiny_llama().state_dict())
    extra = checkpoint | {"model.layers.9.mlp.up_proj.qweight": torch.zeros(16, 8, dtype=torch.int32)}
    with pytest.raises(ValueError, match="keys the model lacks: model.layers.9"):
        load_gptq(tiny_llama(), extra, verify=False)
    short = {k: v for k, v in checkpoint.items() if k != "model.norm.weight"}
    with pytest.raises(ValueError, match="unloaded: model.norm.weight"):
        load_gptq(tiny_llama(), short, verify=False)
    tied = tiny_llama()
    tied.lm_head.weight = tied.model.embed_tokens.weight  # tie_word_embeddings: saved once, as the embedding
    load_gptq(tied, {k: v for k, v in checkpoint.items() if k != "lm_head.weight"}, verify=False)
    assert torch.equal(tied.lm_head.weight, checkpoint["model.embed_tokens.weight"])
    layer = "model.layers.0.mlp.down_proj."
    qweight, qzeros, scales = symmetric_layer(K=512, N=256)
    wide = checkpoint | {layer + "qweight": qweight, layer + "qzeros": qzeros, layer + "scales": scales,
                         layer + "g_idx": torch.arange(512, dtype=torch.int32) // 128}
    with pytest.raises(ValueError, match="down_proj: .* 512x256 .* 256x128"):
        load_gptq(tiny_llama(), wide, verify=False)


def test_a_group_size_the_dispatcher_was_not_loaded_for_is_named(caplog):
    import logging

    from tunesearch import load_dispatch

    layer = nn.Sequential(nn.Linear(256, 48, bias=False).half())
    qweight, qzeros, scales = symmetric_layer(K=256, N=48, G=64)
    checkpoint = {"0.qweight": qweight, "0.qzeros": qzeros, "0.scales": scales}
    with caplog.at_level(logging.WARNING, logger="tunesearch"):
        load_gptq(layer, checkpoint, load_dispatch(), verify=False)
    assert "group size is 64, the dispatcher's 128" in caplog.text
    assert layer[0].group_size == 64
