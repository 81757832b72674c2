"""Kernel variants for W4A16 matmul: the layout spec, the kernel families and their space."""
from .api import matmul, reference_matmul
from .layout import dequantize, pack_linear, quantize_pack, unpack
from .space import (FAMILIES, GEMV_MAX_M, DeviceLimits, Variant, heuristic_variants,
                    spread_variants, variant_error, variant_space)

__all__ = [
    "FAMILIES", "GEMV_MAX_M", "DeviceLimits", "Variant", "dequantize", "heuristic_variants",
    "matmul", "pack_linear", "quantize_pack", "reference_matmul", "spread_variants", "unpack", "variant_error",
    "variant_space",
]
