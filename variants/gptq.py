"""GPTQ checkpoints read as this package's base layout.

A 4-bit GPTQ linear layer (AutoGPTQ, GPTQModel, the Hugging Face integration) is stored as

* ``qweight``: int32 [K/8, N], the code of row k in ``qweight[k // 8]`` at bits ``4*(k % 8)``: bit for bit
  the base layout's ``packed`` (``layout.py``);
* ``qzeros``: int32 [K/G, N/8], the zero point of column n in word n // 8 at bits ``4*(n % 8)``, stored
  minus one in the original format (``checkpoint_format="gptq"``), as it is in ``"gptq_v2"``;
* ``scales``: fp16 [K/G, N];
* ``g_idx``: int32 [K], the group of each row: k // G unless the checkpoint was quantized in activation
  order (``desc_act``), which permutes K;

and means w = (q − z)·s. Symmetric checkpoints (``sym=True``, the common one) have z = 8 everywhere: the
base layout's w = (q − 8)·s, so their packed words and scales are used as they are. Others are refused
with the reason (a zero point other than 8 is not what the kernels compute; activation order needs A's
columns permuted on every call).
"""
from __future__ import annotations

import torch

from .layout import OFFSET, PACK, check_packed, unpack

FORMATS = {"gptq": 1, "gptq_v2": 0}  # what a stored zero point lacks


def zero_points(qzeros: torch.Tensor, checkpoint_format: str = "gptq") -> torch.Tensor:
    """The zero points [K/G, N] that ``qzeros`` [K/G, N/8] holds (int32)."""
    if checkpoint_format not in FORMATS:
        raise ValueError(f"checkpoint_format must be one of {', '.join(FORMATS)}, got {checkpoint_format!r}")
    # eight nibbles a word along N, as the base layout packs them along K: the spec's unpack, transposed
    return unpack(qzeros.t()).t() + FORMATS[checkpoint_format]


def from_gptq(qweight: torch.Tensor, qzeros: torch.Tensor, scales: torch.Tensor, g_idx: torch.Tensor | None = None,
              *, bits: int = 4, checkpoint_format: str = "gptq") -> tuple[torch.Tensor, torch.Tensor]:
    """(packed int32 [K/8, N], scales fp16 [K/G, N]) in the base layout for a GPTQ layer's tensors, which
    must be symmetric (every zero point 8), in group order (``g_idx`` None or k // G) and 4-bit."""
    if bits != 4:
        raise ValueError(f"only 4-bit GPTQ checkpoints hold W4A16 weights, this one has bits={bits}")
    for name, t in (("qweight", qweight), ("qzeros", qzeros)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int32 or t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D int32 tensor, got "
                             f"{getattr(t, 'dtype', type(t).__name__)} {tuple(getattr(t, 'shape', ()))}")
    if not isinstance(scales, torch.Tensor) or scales.dim() != 2 or scales.shape[0] == 0:
        raise ValueError(f"scales must be a 2-D tensor [K/G, N], got {tuple(getattr(scales, 'shape', ()))}")
    K, N = qweight.shape[0] * PACK, qweight.shape[1]
    if K % scales.shape[0]:
        raise ValueError(f"scales has {scales.shape[0]} groups, which do not divide K={K} evenly")
    group_size = K // scales.shape[0]
    scales = scales.to(torch.float16).contiguous()
    check_packed(qweight, scales, group_size)  # the shapes agree, as the base layout's would
    if tuple(qzeros.shape) != (scales.shape[0], N // PACK) or N % PACK:
        raise ValueError(f"qzeros must be [K/G, N/8] = [{scales.shape[0]}, {N // PACK}], got {tuple(qzeros.shape)}")
    if g_idx is not None:
        groups = torch.arange(K, device=g_idx.device) // group_size
        if g_idx.shape != (K,) or not torch.equal(g_idx.to(groups.dtype), groups):
            raise ValueError("this GPTQ layer was quantized in activation order (desc_act: g_idx permutes K); "
                             "the kernels read groups of consecutive k, so it cannot be used as stored")
    zeros = zero_points(qzeros, checkpoint_format)
    if not bool((zeros == OFFSET).all()):
        found = sorted(set(zeros.unique().tolist()))[:5]
        raise ValueError(f"this GPTQ layer is asymmetric (zero points {found}, not all {OFFSET}): the kernels "
                         f"compute w = (q - {OFFSET})*s; a symmetric checkpoint (sym=True) loads as stored"
                         + (" (or it is a gptq_v2 checkpoint: pass checkpoint_format='gptq_v2')"
                            if checkpoint_format == "gptq" and found == [OFFSET + 1] else ""))
    return qweight.contiguous(), scales
