"""The weight layout, written down as code: this module is the specification.

W [K, N] (K is the reduction axis) is stored as

* ``packed``: int32 [K/8, N]; the 4-bit code of row k sits in ``packed[k // 8]`` at bits
  ``4*(k % 8) .. 4*(k % 8) + 3``. Codes are offset by 8 (0..15), so the eighth nibble can
  set the sign bit of the int32: every unpack masks with 0xF *after* the shift.
* ``scales``: fp16 [K/G, N], one per group of G consecutive k.
* ``w = (q - 8) * s`` (symmetric, no zero point), computed in fp16 exactly as ``dequantize`` does.

Every kernel is tested against ``a.float() @ dequantize(packed, scales).float()``.

A second layout, **frag32**, stores the same codes in the order the rsmma family's register fragment
reads them (one copy of a shape's weights in one layout, repacked once at load: ``to_layout``):

* ``packed``: int32 [K/32, 4N]; in row c (a 32-deep chunk of k), the word at ``8p + 2t + h`` belongs to
  column n = 2p + h and holds the 8 codes k = 32c + 2t + 8 i0 + 16 i1 + e at nibble position
  (i0 + 2 i1) + 4e, i.e. what thread t of a wgmma quad holds for that column (``frag32_k``).
* ``scales`` as in the base layout. A pair's shapes tell the layouts apart: base packed has N columns,
  frag32 4N (``layout_of``).
"""
from __future__ import annotations

import torch

PACK = 8  # nibbles per int32
OFFSET = 8  # stored code = signed value + 8
LAYOUTS = ("base", "frag32")
CHUNK = 32  # frag32: k per row, two 16-deep wgmma steps
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
    return pack_codes(q.reshape(k, n)), scale16.contiguous()


def pack_codes(codes: torch.Tensor) -> torch.Tensor:
    """Stored codes (0..15) [K, N] -> base-layout packed int32 [K/8, N]: ``unpack``'s inverse."""
    k, n = codes.shape
    q = codes.to(torch.int64).reshape(k // PACK, PACK, n)
    packed64 = (q << _NIBBLE_SHIFTS.to(q.device, torch.int64)[None, :, None]).sum(dim=1)
    return torch.where(packed64 >= 2**31, packed64 - 2**32, packed64).to(torch.int32).contiguous()


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """The stored codes (0..15) as int32 [K, N]."""
    if packed.dtype != torch.int32 or packed.dim() != 2:
        raise ValueError(f"packed must be a 2-D int32 tensor, got {packed.dtype} {tuple(packed.shape)}")
    k8, n = packed.shape
    shifts = _NIBBLE_SHIFTS.to(packed.device)
    codes = (packed[:, None, :] >> shifts[None, :, None]) & 0xF  # mask after the shift: sign bit
    return codes.reshape(k8 * PACK, n)


def frag32_k() -> torch.Tensor:
    """[4 words t, 8 nibble positions] -> k within a frag32 chunk: pair i = position % 4, e = position // 4."""
    t = torch.arange(4)[:, None]
    position = torch.arange(PACK)[None, :]
    i = position % 4
    return 2 * t + 8 * (i % 2) + 16 * (i // 2) + position // 4


def _frag32_order(k: int, n: int) -> torch.Tensor:
    """For frag32's [K/32, 4N, 8] nibbles in memory order, the base layout's flat index k * N + n of each."""
    c = torch.arange(k // CHUNK)[:, None, None]
    col = torch.arange(4 * n)[None, :, None]
    p, t, h = col // 8, (col // 2) % 4, col % 2
    return (CHUNK * c + frag32_k()[t, torch.arange(PACK)[None, None, :]]) * n + 2 * p + h


def pack_frag32(packed: torch.Tensor) -> torch.Tensor:
    """Base-layout packed int32 [K/8, N] -> frag32 int32 [K/32, 4N] (K a multiple of 32, N even)."""
    codes = unpack(packed)
    k, n = codes.shape
    if k % CHUNK or n % 2:
        raise ValueError(f"frag32 needs K a multiple of {CHUNK} and N even, got K={k} N={n}")
    nibbles = codes.reshape(-1)[_frag32_order(k, n).to(packed.device)].to(torch.int64)  # [K/32, 4N, 8]
    words = (nibbles << (_NIBBLE_SHIFTS.to(packed.device, torch.int64))).sum(dim=2)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32).contiguous()


def unpack_frag32(packed_f: torch.Tensor) -> torch.Tensor:
    """The stored codes (0..15) of frag32 int32 [K/32, 4N] as int32 [K, N] in k order."""
    if packed_f.dtype != torch.int32 or packed_f.dim() != 2 or packed_f.shape[1] % 8:
        raise ValueError(f"frag32 packed must be 2-D int32 [K/32, 4N] with N even, got {packed_f.dtype} "
                         f"{tuple(packed_f.shape)}")
    k, n = packed_f.shape[0] * CHUNK, packed_f.shape[1] // 4
    shifts = _NIBBLE_SHIFTS.to(packed_f.device)
    nibbles = (packed_f[:, :, None] >> shifts) & 0xF  # mask after the shift: sign bit
    codes = torch.empty(k * n, dtype=torch.int32, device=packed_f.device)
    codes[_frag32_order(k, n).to(packed_f.device)] = nibbles
    return codes.reshape(k, n)


def layout_of(packed: torch.Tensor, scales: torch.Tensor) -> str:
    """The layout a (packed, scales) pair is stored in, told by their widths: N (base) or 4N (frag32)."""
    if packed.dim() == 2 and scales.dim() == 2 and packed.shape[1] == 4 * scales.shape[1] != 0:
        return "frag32"
    return "base"


def check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"unknown weight layout {layout!r}; known: {', '.join(LAYOUTS)}")


def packed_shape(k: int, n: int, layout: str) -> tuple[int, int]:
    """The shape of W [k, n]'s packed words in ``layout``: [K/8, N] (base) or [K/32, 4N] (frag32)."""
    check_layout(layout)
    return (k // PACK, n) if layout == "base" else (k // CHUNK, 4 * n)


def to_layout(packed: torch.Tensor, layout: str) -> torch.Tensor:
    """Base-layout ``packed`` stored in ``layout`` (done once, when the weights are loaded)."""
    check_layout(layout)
    return packed if layout == "base" else pack_frag32(packed)


def to_base(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``packed`` in the base layout, whichever layout the pair is stored in (a checkpoint saved with
    another GPU's table, whose layout differs)."""
    return packed if layout_of(packed, scales) == "base" else pack_codes(unpack_frag32(packed))


def codes_of(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The codes (0..15) as int32 [K, N], whichever layout the pair is stored in."""
    return unpack_frag32(packed) if layout_of(packed, scales) == "frag32" else unpack(packed)


def check_packed(packed: torch.Tensor, scales: torch.Tensor, group_size: int) -> tuple[int, int]:
    """Validate a (packed, scales) pair, in either layout, and return (K, N)."""
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
    if layout_of(packed, scales) == "frag32":
        k, n = packed.shape[0] * CHUNK, scales.shape[1]
        if n % 2:
            raise ValueError(f"frag32 packed {tuple(packed.shape)} needs N even, got N={n}")
    else:
        k, n = packed.shape[0] * PACK, packed.shape[1]
    check_group_size(k, group_size)
    if tuple(scales.shape) != (k // group_size, n):
        raise ValueError(
            f"scales must be [K/G, N] = [{k // group_size}, {n}] for packed {tuple(packed.shape)} "
            f"and group_size={group_size}, got {tuple(scales.shape)}"
        )
    return k, n


def dequantize(packed: torch.Tensor, scales: torch.Tensor, group_size: int = 128) -> torch.Tensor:
    """fp16 W [K, N] = (q - 8) * s, the reference every kernel is tested against (either layout)."""
    check_packed(packed, scales, group_size)
    values = (codes_of(packed, scales) - OFFSET).to(torch.float16)
    return values * scales.repeat_interleave(group_size, dim=0)


def pack_linear(linear: torch.nn.Linear, group_size: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack a ``torch.nn.Linear`` weight ([N, K] = [out, in]) into this layout (W = weight.T)."""
    if not isinstance(linear, torch.nn.Linear):
        raise ValueError(f"expected torch.nn.Linear, got {type(linear).__name__}")
    return quantize_pack(linear.weight.detach().t(), group_size)
