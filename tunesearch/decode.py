"""Decode benchmark: greedy decoding of a Llama-shaped model, one CUDA graph per token step.

The model is a plain Llama decoder (RMSNorm, rotary attention over a static KV cache, SwiGLU MLP)
built from ``nn.Linear`` layers, so ``quantize_model`` swaps the same modules it swaps in a Hugging
Face model. Q, K, V and gate/up are fused, as serving stacks load them: a 7B block is then the
llama-7b preset's four shapes (4096x12288, 4096x4096, 4096x22016, 11008x4096); with grouped k/v heads
(``kv_heads``, Llama 3's 8) and a head size of its own (``head_size``), those of ``shapes.config_shapes``.
It is written here rather than taken from ``transformers`` so that one decode step is
graph-capturable on every transformers version: positions live in a device tensor and nothing in
the step reads a value back to the host.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class DecoderConfig:
    hidden: int = 4096
    intermediate: int = 11008
    heads: int = 32
    layers: int = 8
    vocab: int = 32000
    max_len: int = 512
    kv_heads: int | None = None  # grouped-query attention: k/v heads each serving heads / kv_heads (None: heads)
    head_size: int | None = None  # None: hidden / heads

    def __post_init__(self):
        if min(self.hidden, self.intermediate, self.heads, self.layers, self.vocab, self.max_len,
               self.kv, self.head_dim) <= 0:
            raise ValueError(f"decoder sizes must be positive: {self}")
        if self.heads % self.kv:
            raise ValueError(f"{self.heads} heads cannot share {self.kv} k/v heads evenly")
        if self.head_dim % 2:
            raise ValueError(f"the head size must be even (rotary halves), got {self.head_dim}")

    @classmethod
    def of_model(cls, sizes, layers: int, max_len: int, vocab: int = 32000) -> "DecoderConfig":
        """``layers`` blocks of the model whose ``shapes.ModelSizes`` are ``sizes`` (its vocabulary, else
        ``vocab``): its layers have the shapes ``sizes.shapes()`` gives the sweep."""
        return cls(sizes.hidden, sizes.intermediate, sizes.heads, layers, sizes.vocab or vocab, max_len,
                   kv_heads=sizes.kv_heads, head_size=sizes.head_dim)

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.head_size or self.hidden // self.heads


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        h, i, q, kv = cfg.hidden, cfg.intermediate, cfg.heads * cfg.head_dim, cfg.kv * cfg.head_dim
        self.cfg = cfg
        self.attn_norm, self.mlp_norm = nn.RMSNorm(h, eps=1e-5), nn.RMSNorm(h, eps=1e-5)
        self.qkv_proj, self.o_proj = nn.Linear(h, q + 2 * kv, bias=False), nn.Linear(q, h, bias=False)
        self.gate_up_proj, self.down_proj = nn.Linear(h, 2 * i, bias=False), nn.Linear(i, h, bias=False)
        self.k_cache = self.v_cache = None

    def reset_cache(self, batch: int):
        shape = (batch, self.cfg.kv, self.cfg.max_len, self.cfg.head_dim)
        dev = self.attn_norm.weight.device  # the projections may have been swapped for W4A16Linear
        self.k_cache = torch.zeros(shape, device=dev, dtype=torch.float16)
        self.v_cache = torch.zeros(shape, device=dev, dtype=torch.float16)

    def forward(self, x, pos, cos, sin, mask):
        B, T, _ = x.shape
        H, KV, D = self.cfg.heads, self.cfg.kv, self.cfg.head_dim
        qkv = self.qkv_proj(self.attn_norm(x)).view(B, T, H + 2 * KV, D).transpose(1, 2)  # heads: q, k, v
        q, k, v = qkv.split((H, KV, KV), dim=1)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        grouped = {"enable_gqa": True} if KV != H else {}  # k/v head j serves q heads j·H/KV ..
        att = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask, **grouped)
        x = x + self.o_proj(att.transpose(1, 2).reshape(B, T, H * D))
        gate, up = self.gate_up_proj(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down_proj(F.silu(gate) * up)


class Decoder(nn.Module):
    """Llama-shaped decoder with a static KV cache; ``forward(tokens [B, T], pos [T])`` -> logits."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.RMSNorm(cfg.hidden, eps=1e-5)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, cfg.head_dim, 2).float() / cfg.head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def reset_cache(self, batch: int):
        for block in self.blocks:
            block.reset_cache(batch)

    def forward(self, tokens, pos):
        angles = pos[:, None].float() * self.inv_freq[None, :]
        cos, sin = angles.cos().to(torch.float16), angles.sin().to(torch.float16)
        mask = torch.arange(self.cfg.max_len, device=pos.device)[None, :] <= pos[:, None]
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, pos, cos, sin, mask)
        return self.lm_head(self.norm(x))


def random_decoder(cfg: DecoderConfig, device="cuda", seed: int = 0) -> Decoder:
    """Random weights with a sensible scale (std 0.02, as Llama's init), fp16, eval mode."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = Decoder(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
    return model.to(torch.float16).eval()


class GreedyDecoder:
    """Greedy decoding of ``model`` for a fixed batch: prefill eagerly, then one step per token,
    optionally captured once in a CUDA graph and replayed."""

    def __init__(self, model: Decoder, prompt: torch.Tensor, new_tokens: int, graph: bool):
        self.model, self.prompt, self.new_tokens = model, prompt, new_tokens
        batch, self.prompt_len = prompt.shape
        if self.prompt_len + new_tokens > model.cfg.max_len:
            raise ValueError(f"prompt {self.prompt_len} + {new_tokens} tokens exceed max_len {model.cfg.max_len}")
        dev = prompt.device
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.out = torch.zeros(batch, new_tokens, dtype=torch.long, device=dev)
        model.reset_cache(batch)
        self.graph = None
        if graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):  # compile and pick kernels outside the capture
                    self._prefill()
                    self._step()
            torch.cuda.current_stream().wait_stream(side)
            self._prefill()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._step()

    @torch.no_grad()
    def _prefill(self):
        pos = torch.arange(self.prompt_len, device=self.prompt.device)
        logits = self.model(self.prompt, pos)
        self.token.copy_(logits[:, -1].argmax(-1, keepdim=True))
        self.pos.fill_(self.prompt_len)

    @torch.no_grad()
    def _step(self):
        logits = self.model(self.token, self.pos)
        self.out.index_copy_(1, self.pos - self.prompt_len, self.token)
        self.token.copy_(logits[:, -1].argmax(-1, keepdim=True))
        self.pos.add_(1)

    def decode(self) -> torch.Tensor:
        """Prefill (untimed in ``timed_decode``) and ``new_tokens`` steps; the generated tokens."""
        self._prefill()
        self._run_steps()
        return self.out.clone()

    def _run_steps(self):
        for _ in range(self.new_tokens):
            if self.graph is not None:
                self.graph.replay()
            else:
                self._step()

    def timed_decode(self, repeats: int = 3) -> float:
        """Median seconds for the ``new_tokens`` steps (prefill excluded)."""
        times = []
        for _ in range(repeats):
            self._prefill()
            if self.prompt.is_cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                self._run_steps()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            else:
                t0 = time.perf_counter()
                self._run_steps()
                times.append(time.perf_counter() - t0)
        return sorted(times)[len(times) // 2]


@dataclass
class DecodeRow:
    batch: int
    new_tokens: int
    fp16_tokens_per_s: float
    int4_tokens_per_s: float
    speedup: float
    fp16_ms_per_step: float
    int4_ms_per_step: float

    def to_dict(self):
        return asdict(self)


def decode_benchmark(model: Decoder, dispatch, batches=(1, 4, 16), new_tokens: int = 64,
                     prompt_len: int = 16, graph: bool = True, group_size: int = 128,
                     repeats: int = 3, log=None) -> list[DecodeRow]:
    """fp16 ``model`` against its W4A16 copy (``quantize_model`` with ``dispatch``), per batch."""
    from .nn import quantize_model

    quantized = quantize_model(copy.deepcopy(model), dispatch, group_size=group_size)
    dev = next(model.parameters()).device
    gen = torch.Generator().manual_seed(0)
    rows = []
    for batch in batches:
        prompt = torch.randint(0, model.cfg.vocab, (batch, prompt_len), generator=gen).to(dev)
        result = {}
        for name, m in (("fp16", model), ("int4", quantized)):
            runner = GreedyDecoder(m, prompt, new_tokens, graph)
            result[name] = runner.timed_decode(repeats)
            del runner
            m.reset_cache(1)  # free the batch's cache before the next model allocates its own
        t16, t4 = result["fp16"], result["int4"]
        row = DecodeRow(batch, new_tokens, batch * new_tokens / t16, batch * new_tokens / t4, t16 / t4,
                        1e3 * t16 / new_tokens, 1e3 * t4 / new_tokens)
        if log:
            log(row)
        rows.append(row)
    return rows


def markdown_table(rows: list[DecodeRow]) -> str:
    lines = ["| batch | fp16 tokens/s | int4 tokens/s | speedup | fp16 ms/step | int4 ms/step |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.batch} | {r.fp16_tokens_per_s:.0f} | {r.int4_tokens_per_s:.0f} | {r.speedup:.2f}x "
                     f"| {r.fp16_ms_per_step:.3f} | {r.int4_ms_per_step:.3f} |")
    return "\n".join(lines)
