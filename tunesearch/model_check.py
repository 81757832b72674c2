"""The logit check: a quantized Llama against the same model with dequantized weights."""
from __future__ import annotations

import copy
from dataclasses import asdict, dataclass

import torch

from .nn import dequantized_reference, quantize_model


@dataclass
class LogitCheck:
    max_abs: float
    max_rel: float  # max |q - ref| / max |ref|
    top1_agreement: float
    tokens: int
    passed: bool

    def to_dict(self):
        return asdict(self)


def tiny_llama(hidden=128, intermediate=256, layers=2, heads=4, kv_heads=2, vocab=256, seed=0,
               dtype=torch.float16, device="cpu"):
    """A random-weight Llama built from a LlamaConfig (no download)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                         max_position_embeddings=256, attn_implementation="eager")
    return LlamaForCausalLM(config).to(device=device, dtype=dtype).eval()


def compare_logits(quantized, reference, input_ids, max_rel: float = 2e-2, min_top1: float = 0.95) -> LogitCheck:
    with torch.no_grad():
        q = quantized(input_ids).logits.float()
        r = reference(input_ids).logits.float()
    diff = (q - r).abs()
    rel = (diff.max() / r.abs().max()).item()
    top1 = (q.argmax(-1) == r.argmax(-1)).float().mean().item()
    ok = bool(torch.isfinite(q).all()) and rel < max_rel and top1 >= min_top1
    return LogitCheck(diff.max().item(), rel, top1, int(q.shape[0] * q.shape[1]), ok)


def logit_check(model, input_ids, dispatch=None, group_size: int = 128, corrupt=None) -> LogitCheck:
    """Quantize a copy of ``model`` and compare its logits with the dequantized-reference model.
    ``corrupt(quantized_model)``, for tests, may mis-pack a layer after quantization."""
    reference = dequantized_reference(model, group_size=group_size)
    quantized = quantize_model(copy.deepcopy(model), dispatch, group_size=group_size)
    if corrupt is not None:
        corrupt(quantized)
    return compare_logits(quantized, reference, input_ids)
