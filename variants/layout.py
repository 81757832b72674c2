"""The weight layout, written down as code: this module is the specification.

W [K, N] (K is the reduction axis) is stored as

* ``packed``: int32 [K/8, N]; the 4-bit code of row k sits in ``packed[k // 8]`` at bits
  ``4*(k % 8) .. 4*(k % 8) + 3``. Codes are offset by 8 (0..15), so the eighth nibble can
  set the sign bit of the int32: every unpack masks with 0xF *after* the shift.
* ``scales``: fp16 [K/G, N], one per group of G consecutive k.
* ``w = (q - 8) * s`` (symmetric, no zero point), computed in fp16 exactly as ``dequantize`` does.

Every kernel is tested against ``a.float() @ dequantize(packed, scales).float()``.
"""
from __future__ import annotations

import torch

PACK = 8  # nibbles per int32
OFFSET = 8  # stored code = signed value + 8
_NIBBLE_SHIFTS = torch.arange(PACK, dtype=torch.int32) * 4


def check_group_size(k: int, group_size: int) -> None:
    if not isinstance(group_size, int) or group_size <= 0 or group_size % PACK:
        raise ValueError(f"group_size must be a positive multiple of {PACK}, got {group_size!r}")
    if k % group_size:
        raise ValueError(f"K={k} is not a multiple of group_size={group_size}")


def quantize_pack(w: torch.Tensor, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize a float weight ``w`` [K, N] to (packed int32 [K/8, N], scales fp16 [K/G, N])."""
    if not isinstance(w, torch.Tensor):
        raise ValueError(f"w must be a torch.Tensor, got {type(w).__name__}")
    if w.dim() != 2:
        raise ValueError(f"w must be 2-D [K, N], got shape {tuple(w.shape)}")
    if not w.is_floating_point():
        raise ValueError(f"w must be a floating-point tensor, got {w.dtype}")
    k, n = w.shape
    if k == 0 or n == 0:
        raise ValueError(f"w must be non-empty, got shape {tuple(w.shape)}")
    if k % PACK:
        raise ValueError(f"K={k} is not a multiple of {PACK} (eight nibbles per int32)")
    check_group_size(k, group_size)
    w32 = w.detach().float()
    if not torch.isfinite(w32).all():
        raise ValueError("w contains NaN or inf; refusing to quantize non-finite weights")

    groups = w32.reshape(k // group_size, group_size, n)
    # max |w| maps to code 7 so the positive side never clips; -8 is used only by rounding.
    scale = groups.abs().amax(dim=1) / 7.0
    if (scale > torch.finfo(torch.float16).max).any():
        raise ValueError("a group's max |w| / 7 overflows fp16 scales")
    scale16 = scale.to(torch.float16)
    # Quantize with the fp16-rounded scale the kernels will see; an all-zero group keeps q = 0.
    safe = torch.where(scale16 == 0, torch.ones_like(scale16), scale16).float()
    q = torch.clamp(torch.round(groups / safe[:, None, :]), -8, 7).to(torch.int64) + OFFSET
    q = q.reshape(k // PACK, PACK, n)
    packed64 = (q << _NIBBLE_SHIFTS.to(q.device, torch.int64)[None, :, None]).sum(dim=1)
    packed = torch.where(packed64 >= 2**31, packed64 - 2**32, packed64).to(torch.int32)
    return packed.contiguous(), scale16.contiguous()


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The stored codes (0..15) as int32 [K, N]."""
    if packed.dtype != torch.int32 or packed.dim() != 2:
        raise ValueError(f"packed must be a 2-D int32 tensor, got {packed.dtype} {tuple(packed.shape)}")
    k8, n = packed.shape
    shifts = _NIBBLE_SHIFTS.to(packed.device)
    codes = (packed[:, None, :] >> shifts[None, :, None]) & 0xF  # mask after the shift: sign bit
    return codes.reshape(k8 * PACK, n)


def check_packed(packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> tuple[int, int]:
    """Validate a (packed, scales) pair and return (K, N)."""
    for name, t in (("packed", packed), ("scales", scales)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    if packed.dtype != torch.int32:
        raise ValueError(f"packed must be int32, got {packed.dtype}")
    if scales.dtype != torch.float16:
        raise ValueError(f"scales must be float16, got {scales.dtype}")
    if packed.device != scales.device:
        raise ValueError(f"packed is on {packed.device} but scales on {scales.device}")
    k, n = packed.shape[0] * PACK, packed.shape[1]
    check_group_size(k, group_size)
    if tuple(scales.shape) != (k // group_size, n):
        raise ValueError(
            f"scales must be [K/G, N] = [{k // group_size}, {n}] for packed {tuple(packed.shape)} "
            f"and group_size={group_size}, got {tuple(scales.shape)}"
        )
    return k, n


def dequantize(packed: torch.Tensor, scales: torch.Tensor, group_size: int = 128) -> torch.Tensor:
    """fp16 W [K, N] = (q - 8) * s, the reference every kernel is tested against."""
    k, n = check_packed(packed, scales, group_size)
    values = (unpack(packed) - OFFSET).to(torch.float16)
    return values * scales.repeat_interleave(group_size, dim=0)


def pack_linear(linear: torch.nn.Linear, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack a ``torch.nn.Linear`` weight ([N, K] = [out, in]) into this layout (W = weight.T)."""
    if not isinstance(linear, torch.nn.Linear):
        raise ValueError(f"expected torch.nn.Linear, got {type(linear).__name__}")
    return quantize_pack(linear.weight.detach().t(), group_size)
