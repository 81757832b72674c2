"""Kernel variants: their ids, their validity rules and the space of every valid one.

A variant is a family plus its integer parameters. ``variant_error`` is the single place that
decides whether a variant can run a shape (the space generator filters through it, ``matmul``
refuses with its message), so the search never proposes a config it would have to learn by
failing.
"""
from __future__ import annotations

import itertools
import json
import math
import os
from dataclasses import dataclass
from typing import Iterator, Mapping

from .rsmma_launch import staged_split
from .rsmma_registers import registers_error

GEMV_MAX_M = 16  # above this the tensor-core families win; gemv's registers grow with BM
# swap-AB puts M on wgmma's N side. At M=128 it beat the dequantize route (forms_probe, H200:
# 54.6 vs 61.6 us on 4096x11008, 46.8 vs 62.9 on 11008x4096), at M=256 it lost (95 vs 67): the
# sweep decides in between.
SWAPAB_MAX_M = 256
# The warp-specialized Gluon GEMM (variants/dqmma.py) beat the packaged table at M=64..128 on the H200
# and tied the dequantize route at M=256 (NOTES.md row 45): the sweep decides across that range.
DQMMA_M = (64, 256)
# dqmma's SPLIT_K=0: no fixed split; a persistent grid of one CTA per SM splits all tiles' blocks evenly
# (stream-K), so a last wave of few tiles does not leave most SMs idle (row 49: 172 tiles of 128x128
# on 132 SMs, 67.2 -> 57.5 us; at 86 tiles level, the blocks slow down when every SM computes)
STREAM_K = 0
# The register-operand Gluon GEMM (variants/rsmma.py) beat dqmma's picks at M=64..256 on the H200, swapab's
# at M=48 (64-token tiles, 18-40%, row 57), M=24..32 (32-token tiles with 2-4 CTAs an SM, row 58) and,
# with 16-token tiles, every M=2..16 bucket by 3-14% (row 61). At M=1 it took 11008x4096 and 4096x22016
# from the gemv (by 5-7%), the gemv kept the other three (by 0.4-6%; row 64): it follows the gemv in the seeds.
# Above M=256 it beat the dequantize route on 27 of the 30 llama-7b keys (row 77: M=1024 0.90-1.02x fp16
# against the route's 0.81-0.83x): its 256-token tiles of two warp groups are cuBLAS's tile shape, and its
# unpack is paid once a block for 256 tokens.
RSMMA_M = (1, 4096)
# twotile (variants/twotile.py): rsmma's token tile as HI + LO tokens on one unpacked fragment, offered where
# one such tile holds M and a power-of-two tile would not: HI < M <= HI + LO (M = 65..96 and 129..192)
TWOTILE_M = (65, 192)
# The most CTAs an SM each (HI, BN) tile of twotile fits at BK = 64: found offline for sm_90 (two wgmmas in
# flight, no spills; tests/test_experiments.py), HI = 128 at 128 registers a thread, 64 at 80
TWOTILE_CTAS = {(128, 64): 2, (128, 128): 1, (64, 64): 3, (64, 128): 1}
# rsmmapf (variants/rsmmapf.py): rsmma's split launch with the owner's partials prefetched by its loader warp,
# where rsmma's picks split (M <= 32 on the llama-7b shapes, row 132; 4096x4096 to M=64)
RSMMAPF_M = (1, 64)
DQMMA_W_BUFFERS = 2  # dqmma.W_BUFFERS (this module cannot import the Gluon one; a test keeps them equal)

# Parameter order (and the id's abbreviations) per family.
FAMILY_PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "gemm": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("GROUP_M", "g"),
             ("num_warps", "w"), ("num_stages", "s")),
    "splitk": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"),
               ("num_warps", "w"), ("num_stages", "s")),
    "gemv": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"),
             ("num_warps", "w"), ("num_stages", "s")),
    "swapab": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"),
               ("num_warps", "w"), ("num_stages", "s")),
    "dequant": (("BK", "bk"), ("BN", "bn"), ("num_warps", "w")),
    "dqchunk": (("BK", "bk"), ("BN", "bn"), ("MB", "mb"), ("num_warps", "w")),
    # num_stages is the depth of its own TMA ring (STAGES), num_warps = BM / 16 (the MMA warps)
    "dqmma": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"),
              ("num_warps", "w"), ("num_stages", "s")),
    # BM tokens (the wgmma N), BN = 16 x num_warps columns of W (the wgmma M), num_stages its TMA ring,
    # CTAS the CTAs an SM its launch's registers are sized for (variants/rsmma_launch.py), SKEW the blocks
    # each split but the first gives up to it (rsmma_kernel: the others end first and split 0 sums their
    # partials itself), CLUSTER the CTAs of neighbouring column tiles launched as one cluster (api.cluster_meta)
    "rsmma": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"),
              ("num_warps", "w"), ("num_stages", "s"), ("CTAS", "c"), ("SKEW", "skew"), ("CLUSTER", "cl")),
    # BM = HI tokens and LO more (two accumulators on one fragment), the rest as rsmma's; SPLIT_K 1 (a CTA
    # a tile), 0 (stream-K) or a split count (space.twotile_grid)
    "twotile": (("BM", "bm"), ("LO", "lo"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"),
                ("num_warps", "w"), ("num_stages", "s"), ("CTAS", "c")),
    # rsmma's parameters (a split launch: SPLIT_K 2 or 4), and where the owner's loader puts the other
    # splits' partials: RING 0 a buffer of their own, 1 the A stages of the ring its MMA warps free last
    "rsmmapf": (("BM", "bm"), ("BN", "bn"), ("BK", "bk"), ("SPLIT_K", "sk"), ("num_warps", "w"),
                ("num_stages", "s"), ("CTAS", "c"), ("SKEW", "skew"), ("CLUSTER", "cl"), ("RING", "ring")),
}
FAMILIES = tuple(FAMILY_PARAMS)
# Parameters added to a family after its variants were stored: a variant without one has its default,
# and an id leaves it out at its default, so the ids stored before it keep naming the same kernel.
FAMILY_DEFAULTS: dict[str, dict[str, int]] = {"rsmma": {"CTAS": 1, "SKEW": 0, "CLUSTER": 1},
                                              # rsmma's, so that a variant's id is its rsmma twin's with the
                                              # family's name and RING (family_twins)
                                              "rsmmapf": {"CTAS": 1, "SKEW": 0, "CLUSTER": 1, "RING": 0}}
# The families that expand the weights to fp16 and hand the product to cuBLAS: no tile of their own
# over M, no split-K; launched by the dequantize launcher, not by one kernel call.
CUBLAS_FAMILIES = ("dequant", "dqchunk")

# The grids each family's space is drawn from (before filtering by variant_error).
# gemv's num_stages is its own register prefetch (2: the next block loaded before this one is
# unpacked): Triton does not pipeline that loop, and before the prefetch the 566 H200 gemv pairs
# differing only in num_stages (1 vs 2) timed within noise (median ratio 1.000).
FAMILY_GRID: dict[str, dict[str, tuple[int, ...]]] = {
    "gemm": dict(BM=(16, 32, 64, 128, 256), BN=(32, 64, 128, 256), BK=(32, 64, 128),
                 GROUP_M=(1, 8), num_warps=(4, 8), num_stages=(2, 3, 4)),
    "splitk": dict(BM=(16, 32, 64), BN=(32, 64, 128, 256), BK=(32, 64, 128),
                   SPLIT_K=(2, 4, 8, 16), num_warps=(4, 8), num_stages=(2, 3, 4)),
    "gemv": dict(BM=(1, 2, 4, 8, 16), BN=(64, 128, 256, 512, 1024), BK=(32, 64, 128, 256),
                 SPLIT_K=(1, 2, 4, 8, 16, 32), num_warps=(2, 4, 8), num_stages=(1, 2)),
    # swapab with 2 warps runs mma.sync (wgmma needs a warp group of 4): no asynchronous wait
    # per nibble-plane dot, more CTAs per SM
    "swapab": dict(BM=(16, 32, 64), BN=(64, 128, 256), BK=(128, 256),
                   SPLIT_K=(1, 2, 4, 8, 16), num_warps=(2, 4, 8), num_stages=(2, 3, 4)),
    "dequant": dict(BK=(32, 64, 128), BN=(64, 128, 256), num_warps=(4, 8)),
    # dequantize-then-cuBLAS in column chunks of about MB megabytes of fp16, each expanded and then
    # multiplied while it is still in L2: the fp16 copy need never reach DRAM (dequant writes and
    # cuBLAS reads 2 bytes per weight, 4x the int4 stream, which is the M=1024 gap on the H200)
    "dqchunk": dict(BK=(32, 64), BN=(128,), MB=(8, 16, 32), num_warps=(4, 8)),
    # 2-6 stages of the ring (row 45's best: bm128.bn128.bk128, 4 stages); BN=256 (its MMA warps issue
    # the TMA, row 47) won at 4096x22016 M=128 and 4096x11008 M=256 only; SPLIT_K=0 is stream-K
    "dqmma": dict(BM=(64, 128), BN=(64, 128, 256), BK=(64, 128), SPLIT_K=(STREAM_K, 1, 2, 4),
                  num_warps=(4, 8), num_stages=(2, 3, 4, 6)),
    # the probes' winners (rows 50-51): 5-8 stages, one warp group (BN=64) where columns are few. 3 splits
    # (86 tiles of 4096x11008 at BN=128 as 258 CTAs, two waves less 6) lost everywhere in the _s21 sweep:
    # 37.2 vs 29.1 us at M=128, 76.3 vs 46.0 at M=256 (their fp32 partials cost more than the idle SMs)
    # CTAS 2-4: several CTAs an SM (row 53), where their registers (rsmma_registers.MMA_REGISTERS) and rings fit
    # SPLIT_K=0 is stream-K: the CTAs that run at once (CTAS an SM) share all tiles' blocks evenly
    # BM=8 (the wgmma's narrowest N, where one such tile holds M: A's TMA box has fewer rows past M, which
    # the TMA zero-fills slowly, row 66) with its partials scaled after the wgmma beat the table's 16-token
    # picks at every M <= 8 key timed (row 67: 4096x22016 M=1 18.50 vs 21.21 us, 4096x12288 M=4 12.74 vs 14.34).
    # 8 splits lost at every key tried (row 70: 4096x4096 and 11008x4096 at M=1..16, e.g. 7.52 vs 7.16 us at
    # 4096x4096 M=8): their partials cost more than the CTAs they add
    # Deeper rings lost at every M <= 64 pick tried (row 82: 12 and 16 stages 0.4-1.9 us slower than 6).
    # SKEW > 0 (row 82): the other splits end SKEW blocks early, so the first finds their partials in
    # and adds them itself, without the reduction's store, fence and count: 2-5% at 7 of 13 split picks
    # (M=32 11008x4096 14.01 -> 13.25 us), a loss at others (4096x4096 M=1 7.10 -> 7.29)
    # CLUSTER=2 (row 89): pairs of neighbouring column tiles launched as one cluster, the kernel unchanged:
    # 1.5-4.4% off the M <= 64 picks of 4096x22016, 0-2% elsewhere, +-0.7% at M=256 (clusters of 4 lost)
    "rsmma": dict(BM=(8, 16, 32, 64, 128, 256), BN=(64, 128), BK=(64, 128), SPLIT_K=(STREAM_K, 1, 2, 4),
                  num_warps=(4, 8), num_stages=(3, 4, 5, 6, 8), CTAS=(1, 2, 3, 4), SKEW=(0, 2, 3, 4, 6),
                  CLUSTER=(1, 2)),
    # the experiment's (NOTES.md row 91) winners were all BK=64: 4 stages at two CTAs an SM (HI=128) or
    # three (HI=64), 6 at one or two; BK=128 (two stages at two CTAs, what fits) ran 1.32-1.58x the best
    # SPLIT_K 2 and 4: stream-K's machinery with a CTA per (tile, split), untimed so far (NOTES.md row 93)
    "twotile": dict(BM=(64, 128), LO=(8, 16, 32, 64), BN=(64, 128), BK=(64,), SPLIT_K=(STREAM_K, 1, 2, 4),
                    num_warps=(4, 8), num_stages=(3, 4, 5, 6), CTAS=(1, 2, 3)),
    # rsmma's grid where it splits; RING=1 only where an A stage holds an fp32 partial (BK = 2 BN)
    "rsmmapf": dict(BM=(8, 16, 32, 64), BN=(64, 128), BK=(64, 128), SPLIT_K=(2, 4), num_warps=(4, 8),
                    num_stages=(3, 4, 5, 6, 8), CTAS=(1, 2, 3, 4), SKEW=(0, 2, 3, 4, 6), CLUSTER=(1, 2), RING=(0, 1)),
}
# Families that only run where DeviceLimits.gluon says so (Gluon, an sm_90 GPU, no interpreter).
GLUON_FAMILIES = ("dqmma", "rsmma", "twotile", "rsmmapf")
# The families that read each weight layout (layout.LAYOUTS): frag32 is rsmma's register fragment's order
# (NOTES.md row 69), with a dequantizer of its own for the route above the crossover; twotile and rsmmapf read
# frag32 only (the packaged tables' layout at every M they serve)
LAYOUT_FAMILIES = {"base": tuple(f for f in FAMILIES if f not in ("twotile", "rsmmapf")),
                   "frag32": ("rsmma", "twotile", "rsmmapf", "dequant")}
# Below this the fp16 copy of the weights cannot pay. It was 256 for the first H200 sweep, whose
# table then has 4096x4096 at 47 us for M=192 against 26 us at M=256 (dequant): the search had
# never tried dequant at M=96..192. Lowered so the next sweep measures the crossover.
DEQUANT_MIN_M = 32


@dataclass(frozen=True)
class DeviceLimits:
    """What bounds a variant on a device. The default is a Hopper (H100/H200) part."""
    shared_memory: int = 232448  # bytes per block, opt-in maximum
    num_sms: int = 132
    sm_shared_memory: int = 233472  # bytes an SM holds for all its CTAs (each also reserves 1 KB)
    name: str = "generic-sm90"
    gluon: bool = False  # the Gluon families can run: never assumed, only found on a device

    @classmethod
    def of(cls, device=None) -> "DeviceLimits":
        if device is None or isinstance(device, DeviceLimits):
            return device or cls()
        import torch

        dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
        if dev.type != "cuda":
            return cls()
        props = torch.cuda.get_device_properties(dev)
        smem = getattr(props, "shared_memory_per_block_optin", cls.shared_memory)
        sm_smem = getattr(props, "shared_memory_per_multiprocessor", cls.sm_shared_memory)
        return cls(shared_memory=int(smem), num_sms=int(props.multi_processor_count), name=props.name,
                   sm_shared_memory=int(sm_smem), gluon=_gluon_runs((props.major, props.minor)))


class Variant:
    """One kernel configuration: ``family`` plus integer ``params``; immutable, hashable by id."""

    __slots__ = ("family", "_params", "id")

    def __init__(self, family: str, params: Mapping[str, int]):
        if family not in FAMILY_PARAMS:
            raise ValueError(f"unknown kernel family {family!r}; known: {', '.join(FAMILIES)}")
        names = [name for name, _ in FAMILY_PARAMS[family]]
        params = {**FAMILY_DEFAULTS.get(family, {}), **params}
        if set(params) != set(names):
            raise ValueError(f"{family} variant needs params {names}, got {sorted(params)}")
        for name in names:
            value = params[name]
            least = STREAM_K if name == "SPLIT_K" and family in GLUON_FAMILIES else 0 if name in ("SKEW", "RING") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{family} param {name} must be an int >= {least}, got {value!r}")
        object.__setattr__(self, "family", family)
        object.__setattr__(self, "_params", tuple((name, int(params[name])) for name in names))
        defaults = FAMILY_DEFAULTS.get(family, {})
        ident = ".".join([family] + [f"{abbr}{params[n]}" for n, abbr in FAMILY_PARAMS[family]
                                     if n not in defaults or params[n] != defaults[n]])
        object.__setattr__(self, "id", ident)

    def __setattr__(self, name, value):
        raise AttributeError("Variant is immutable")

    @property
    def params(self) -> dict[str, int]:
        return dict(self._params)

    def __getitem__(self, name: str) -> int:
        return dict(self._params)[name]

    def to_dict(self) -> dict:
        return {"family": self.family, "params": self.params, "id": self.id}

    @classmethod
    def from_dict(cls, d: Mapping) -> "Variant":
        if not isinstance(d, Mapping) or "family" not in d or "params" not in d:
            raise ValueError(f"a variant dict needs 'family' and 'params', got {d!r}")
        variant = cls(d["family"], d["params"])
        if "id" in d and d["id"] != variant.id:
            raise ValueError(f"variant id {d['id']!r} does not match its params ({variant.id})")
        return variant

    @classmethod
    def from_id(cls, ident: str) -> "Variant":
        family, *fields = str(ident).split(".")
        if family not in FAMILY_PARAMS or len(fields) > len(FAMILY_PARAMS[family]):
            raise ValueError(f"unknown variant id {ident!r}")
        params, defaults = {}, FAMILY_DEFAULTS.get(family, {})
        for name, abbr in FAMILY_PARAMS[family]:  # in order; a parameter at its default may be left out
            field = fields[0] if fields else ""
            if field.startswith(abbr) and field[len(abbr):].isdigit():
                params[name] = int(fields.pop(0)[len(abbr):])
            elif name not in defaults:
                raise ValueError(f"unknown variant id {ident!r} (expected {abbr}<int> for {name})")
        if fields:
            raise ValueError(f"unknown variant id {ident!r} (unexpected {fields[0]!r})")
        return cls(family, params)  # (a default written out, as in "...c1", is read; its id leaves it out)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def __eq__(self, other):
        return isinstance(other, Variant) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"Variant({self.id})"


def interpreting() -> bool:
    """Kernels run in Triton's CPU interpreter (TRITON_INTERPRET=1), not compiled."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _gluon_runs(capability) -> bool:
    """Gluon imports, the device is a Hopper (sm_90: wgmma) and kernels are compiled, not interpreted."""
    if tuple(capability) != (9, 0) or interpreting():
        return False
    try:
        from . import dqmma  # noqa: F401
    except ImportError:  # a Triton without Gluon (or with another Gluon API)
        return False
    return True


def dqmma_shared_bytes(BM: int, BN: int, BK: int, stages: int, w_buffers: int = DQMMA_W_BUFFERS) -> int:
    """dqmma's shared memory: its ring (A, packed W and the scale row per stage), the fp16 W buffers and
    the mbarriers (3 per stage, 2 per W buffer); the compiled kernel adds under 1 KB of alignment
    (tests/test_experiments.py checks both bounds)."""
    return (stages * (BM * BK * 2 + BK // 8 * BN * 4 + BN * 2) + w_buffers * BK * BN * 2
            + 8 * (3 * stages + 2 * w_buffers))


def rsmma_shared_bytes(BM: int, BN: int, BK: int, stages: int) -> int:
    """rsmma's shared memory: its ring (A, packed W and the scale row per stage) and 2 mbarriers a stage;
    the compiled kernel adds under 1 KB of alignment."""
    return stages * (BM * BK * 2 + BK // 8 * BN * 4 + BN * 2 + 16)


def rsmma_ctas_fit(BM: int, BN: int, BK: int, stages: int, limits: "DeviceLimits", extra: int = 0) -> int:
    """How many rsmma CTAs' rings (and ``extra`` bytes each: rsmmapf's) fit an SM's shared memory together
    (each with its alignment and the 1 KB the SM reserves per CTA). twotile's ring is rsmma's with BM = HI +
    LO rows of A a slot."""
    return limits.sm_shared_memory // (rsmma_shared_bytes(BM, BN, BK, stages) + extra + 2048)


def rsmmapf_extra_bytes(BM: int, BN: int, split_k: int, ring: int) -> int:
    """rsmmapf's shared memory beyond rsmma's: the loader's flag word (32 int32) and mbarrier, and, with RING
    0, the other parts' fp32 [BN, BM] slots, a power of two of them (Gluon's shapes need one); with RING 1
    they lie in the ring's A stages (tests/test_experiments.py checks both against the compiled kernel)."""
    return 32 * 4 + 8 + (0 if ring else next_pow2(split_k - 1) * BN * BM * 4)


def gluon_grid(M: int, N: int, K: int, BM: int, BN: int, BK: int, split_k: int,
               ctas_at_once: int) -> tuple[tuple[int, int, int], int]:
    """dqmma's and rsmma's launch grid, and the most partial tiles one output tile gathers (its workspace
    holds that many fp32 tiles; 1: none). Split-K: a CTA per (column tile, split, row tile). Stream-K:
    as many CTAs as run at once (``ctas_at_once``: the SMs, times rsmma's CTAs an SM; at most one per
    block), CTA c taking units [c U / P, (c + 1) U / P) of the U = tiles x K/BK blocks; each CTA holds at
    least U // P units, so a tile of K/BK blocks meets at most cdiv(K/BK - 1, U // P) + 1 of them."""
    tiles_m, tiles_n, blocks = cdiv(M, BM), cdiv(N, BN), K // BK
    if split_k != STREAM_K:
        return (tiles_n, split_k, tiles_m), split_k
    units = tiles_m * tiles_n * blocks
    ctas = min(ctas_at_once, units)
    return (ctas, 1, 1), cdiv(blocks - 1, units // ctas) + 1


def param_steps(value: int) -> float:
    """A parameter's position for distances between variants: log2 steps, stream-K's SPLIT_K=0 one
    step below a single split."""
    return math.log2(value) if value > 0 else -1.0


def next_pow2(x: int) -> int:
    return 1 << max(0, (int(x) - 1).bit_length())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _group_ok(bk: int, group_size: int) -> bool:
    return (bk <= group_size and group_size % bk == 0) or (bk > group_size and bk % group_size == 0)


def variant_error(variant: Variant, M: int, N: int, K: int, group_size: int = 128,
                  device=None, prune: bool = False, layout: str = "base") -> str | None:
    """Why ``variant`` cannot run (M, N, K, G) on ``device`` with the weights in ``layout``; None when it can.

    With ``prune=True`` also why it *should not*: configs that run correctly but cannot win
    (a tile wider than the problem, split-K when tiles already fill the GPU, ...). The search
    space prunes; ``matmul`` and the runtime accept any variant that computes the right answer.
    """
    limits = DeviceLimits.of(device)
    if variant.family not in LAYOUT_FAMILIES.get(layout, ()):
        return f"{variant.family} does not read weights in layout {layout!r}"
    reason = _hard_error(variant, M, N, K, group_size, limits)
    if reason is None and prune:
        reason = _pruned(variant, M, N, K, limits)
    return reason


def _hard_error(variant: Variant, M, N, K, group_size, limits) -> str | None:
    p = variant.params
    for name in ("BM", "BN", "BK", "num_warps"):
        if name in p and p[name] & (p[name] - 1):
            return f"{name}={p[name]} is not a power of two"
    bn, bk, warps = p["BN"], p["BK"], p["num_warps"]
    split_k = p.get("SPLIT_K", 1)
    threads = 32 * warps
    if bk % 8:
        return f"BK={bk} is not a multiple of 8 (one int32 holds 8 rows)"
    if K % bk:
        return f"K={K} is not a multiple of BK={bk}"
    if split_k > K // bk:
        return f"SPLIT_K={split_k} exceeds the K/BK={K // bk} blocks to split"
    if variant.family in CUBLAS_FAMILIES:
        return None
    bm, stages = p["BM"], p["num_stages"]
    if not _group_ok(bk, group_size):
        return f"BK={bk} and group size {group_size} do not divide one another"
    if variant.family in GLUON_FAMILIES and not limits.gluon:
        return f"{variant.family} is a Gluon kernel: it needs an sm_90 GPU and a Triton with Gluon, not {limits.name}"
    if variant.family == "dqmma":
        return _dqmma_error(p, M, N, K, group_size, limits)
    if variant.family == "rsmma":
        return _rsmma_error(p, M, N, K, group_size, limits)
    if variant.family == "rsmmapf":
        return _rsmmapf_error(p, M, N, K, group_size, limits)
    if variant.family == "twotile":
        return _twotile_error(p, M, N, K, group_size, limits)
    if variant.family == "gemv":
        # accumulator + per-block sum (fp32, BM x BK/8 x BN) and the packed block, per thread
        regs = (2 * bm * (bk // 8) * bn + packed_blocks_held(p) * (bk // 8) * bn) // threads
        if regs > 128:
            return f"about {regs} registers/thread of accumulators (limit 128)"
        return None
    if min(bm, bn, bk) < 16:
        return "tl.dot needs BM, BN, BK >= 16"
    if variant.family == "swapab":
        if bk < 128:
            return f"swapab's nibble planes are [BN, BK/8]: the dot needs BK/8 >= 16, got BK={bk}"
        if group_size % bk:
            return f"swapab scales per block: the group size {group_size} must be a multiple of BK={bk}"
    if bm * bn // threads > 128:
        return f"{bm * bn // threads} fp32 accumulator registers/thread (limit 128)"
    if bk * bn // threads > 128:
        return f"{bk * bn // threads} dequantized weight values/thread (limit 128)"
    # Packed rows are staged once per k they hold (BK x BN int32, stages - 1 buffers), A per
    # stage, plus the fp16 tile wgmma reads. Fitted to the sweep's 206 shared-memory compile
    # failures on the H200: it flags all of them and none of the 1279 tiles that compiled.
    smem = (stages - 1) * bk * bn * 4 + stages * bm * bk * 2 + bk * bn * 2
    if smem > limits.shared_memory:
        return f"needs ~{smem} B of shared memory, the device has {limits.shared_memory}"
    if variant.family == "splitk" and split_k < 2:
        return "splitk needs SPLIT_K >= 2"
    return _workspace_error(split_k, M, N)


def _workspace_error(split_k: int, M: int, N: int) -> str | None:
    """The split-K reduction's fp32 partials [SPLIT_K, M, N] are allocated per call: bounded. One part
    (no split) has none."""
    return "split-K workspace over 256 MiB" if split_k > 1 and split_k * M * N * 4 > 256 << 20 else None


def _tma_ring_error(family: str, consumer: str, bk: int, stages: int, N: int, group_size: int, ring_bytes: int,
                    limits) -> str | None:
    """The rules of the Gluon families' TMA ring: one scale row per BK block, a loader that runs ahead of
    the ``consumer`` warps, the scales' rows copied by TMA, and the ring in the SM's shared memory."""
    if group_size % bk or bk < 64:
        return f"{family} folds one scale row per block: BK={bk} must be >= 64 and divide the group size {group_size}"
    if stages < 2:
        return f"{family}'s loader runs ahead of the {consumer}: num_stages >= 2, got {stages}"
    if N % 8:
        return f"{family} copies the scales by TMA: a row of 2N bytes must be a multiple of 16, N={N}"
    smem = ring_bytes + 1024  # the compiled kernel's alignment
    if smem > limits.shared_memory:
        return f"needs {smem} B of shared memory, the device has {limits.shared_memory}"
    return None


def _dqmma_error(p, M, N, K, group_size, limits) -> str | None:
    bm, bn, bk, warps, stages = p["BM"], p["BN"], p["BK"], p["num_warps"], p["num_stages"]
    if bm not in (64, 128) or warps != bm // 16:
        return f"dqmma's wgmma M is 16 rows per warp: BM must be 64 or 128 with num_warps = BM/16, got {bm}, {warps}"
    if bn not in (64, 128, 256):
        return f"dqmma's BN is the wgmma N: 64, 128 or 256, got {bn}"
    if bn == 256 and bk != 64:
        return f"at BN=256 an unpack thread holds BK/2 words of a block: BK must be 64, got {bk}"
    reason = _tma_ring_error("dqmma", "unpack", bk, stages, N, group_size, dqmma_shared_bytes(bm, bn, bk, stages),
                             limits)
    if reason:
        return reason
    _, parts = gluon_grid(M, N, K, bm, bn, bk, p["SPLIT_K"], limits.num_sms)
    return _workspace_error(parts, cdiv(M, bm) * bm, cdiv(N, bn) * bn)


def _rsmma_error(p, M, N, K, group_size, limits, extra_shared: int = 0) -> str | None:
    bm, bn, bk, warps, stages = p["BM"], p["BN"], p["BK"], p["num_warps"], p["num_stages"]
    if bn not in (64, 128) or warps != bn // 16:
        return f"rsmma's wgmma M is 16 columns of W per warp: BN must be 64 or 128 with num_warps = BN/16, got {bn}, {warps}"
    # the wgmma N could be 8..256; token tiles of 16 tied swapab at M=16 (row 57), those of 32 won at M=32
    # with 2-4 CTAs an SM (row 56)
    if bm not in (8, 16, 32, 64, 128, 256):
        return f"rsmma's BM is the wgmma N: 8, 16, 32, 64, 128 or 256 tokens, got {bm}"
    if p["CTAS"] > 4:
        return f"rsmma's CTAS is 1 to 4 CTAs an SM, got {p['CTAS']}"
    if p["SKEW"] and p["SPLIT_K"] < 2:
        return f"SKEW shortens the other splits of a split tile: SPLIT_K must be 2 or more, got {p['SPLIT_K']}"
    if p["SKEW"] and K // bk // p["SPLIT_K"] - p["SKEW"] < 1:
        return (f"SKEW={p['SKEW']} leaves the other splits no block of their {K // bk // p['SPLIT_K']} "
                f"(K={K}, BK={bk}, SPLIT_K={p['SPLIT_K']})")
    if p["CLUSTER"] not in (1, 2):
        return f"rsmma's CLUSTER is 1 or 2 CTAs a cluster, got {p['CLUSTER']}"
    if p["CLUSTER"] > 1 and (p["SPLIT_K"] == STREAM_K or cdiv(N, bn) % p["CLUSTER"]):
        return (f"CLUSTER={p['CLUSTER']} groups column tiles along the split-K grid's x: SPLIT_K >= 1 and "
                f"the {cdiv(N, bn)} column tiles (N={N}, BN={bn}) a multiple of it")
    return (_tma_ring_error("rsmma", "MMA", bk, stages, N, group_size,
                            rsmma_shared_bytes(bm, bn, bk, stages) + extra_shared, limits)
            or registers_error(bn, bm, bk, p["CTAS"])
            or _workspace_error(gluon_grid(M, N, K, bm, bn, bk, p["SPLIT_K"], p["CTAS"] * limits.num_sms)[1],
                                cdiv(M, bm) * bm, cdiv(N, bn) * bn))


def _rsmmapf_error(p, M, N, K, group_size, limits) -> str | None:
    """rsmma's rules (its tile, ring and registers: the MMA warps are rsmma's), a split launch whose
    reduction reads the partials back through the drained ring (rsmma_launch.staged_split), and where the
    prefetched partials go."""
    bn, bk, stages, split_k, ring = p["BN"], p["BK"], p["num_stages"], p["SPLIT_K"], p["RING"]
    if split_k < 2:
        return f"rsmmapf prefetches a split tile's partials: SPLIT_K must be 2 or more, got {split_k}"
    if not staged_split(bn, bk, stages, split_k):
        return (f"rsmmapf reduces through the drained ring: it must hold an fp32 partial [BN, BM], "
                f"num_stages x BK >= 2 BN, got {stages} x {bk} < 2 x {bn}")
    if ring not in (0, 1):
        return f"rsmmapf's RING is 0 (a buffer of their own) or 1 (the ring's A stages), got {ring}"
    if ring and bk != 2 * bn:
        return f"RING=1 puts an fp32 partial [BN, BM] in an A stage [BM, BK] of fp16: BK must be 2 BN, got {bk}, {bn}"
    if ring and split_k - 1 > stages:
        return f"RING=1 takes an A stage for each of the other {split_k - 1} parts: num_stages >= {split_k - 1}"
    return _rsmma_error(p, M, N, K, group_size, limits, rsmmapf_extra_bytes(p["BM"], bn, split_k, ring))


def _twotile_error(p, M, N, K, group_size, limits) -> str | None:
    hi, lo, bn, bk, warps, stages = p["BM"], p["LO"], p["BN"], p["BK"], p["num_warps"], p["num_stages"]
    if bn not in (64, 128) or warps != bn // 16:
        return f"twotile's wgmma M is 16 columns of W per warp: BN must be 64 or 128 with num_warps = BN/16, got {bn}, {warps}"
    if hi not in (64, 128) or lo not in (8, 16, 32, 64) or lo >= hi:
        return f"twotile's tile is BM = 64 or 128 tokens and LO = 8, 16, 32 or 64 below it, got {hi} + {lo}"
    if bk != 64:
        return f"twotile's tiles were fitted to BK=64 (registers, NOTES.md row 91), got BK={bk}"
    if stages * bk < bn:
        return f"twotile stages C's tile [BN, HI] through the drained ring: num_stages x BK >= BN, got {stages} x {bk}"
    if p["CTAS"] > TWOTILE_CTAS[(hi, bn)]:
        return f"a {hi} + {lo} token tile of BN={bn} fits {TWOTILE_CTAS[(hi, bn)]} CTAs an SM, not CTAS={p['CTAS']}"
    tokens = hi + lo
    return (_tma_ring_error("twotile", "MMA", bk, stages, N, group_size, rsmma_shared_bytes(tokens, bn, bk, stages),
                            limits)
            or _workspace_error(twotile_grid(M, N, K, hi, lo, bn, bk, p["SPLIT_K"], p["CTAS"] * limits.num_sms)[1],
                                cdiv(M, tokens) * tokens, cdiv(N, bn) * bn))


def token_tiles(family: str, params: dict, M: int) -> int | None:
    """How many token tiles a launch of this variant runs at M, where every M with that count runs the
    same launch: the same grid, and each tile's A boxes inside A (rsmma's last tile starts at row M - BM,
    ``dqmma.token_origin``; twotile's boxes as its ``_token_rows``), so that one such M's time is every
    such M's. None where the time also depends on M itself: below one tile's rows A's box passes A's edge,
    which the TMA fills slowly (NOTES.md row 85), and the families without such tiles."""
    if family in ("rsmma", "rsmmapf") and M >= params["BM"]:
        return cdiv(M, params["BM"])
    if family == "twotile" and M > params["BM"]:
        return cdiv(M, params["BM"] + params["LO"])
    return None


def launch_waves(family: str, params: dict, M: int, N: int, K: int, num_sms: int) -> tuple[int, int] | None:
    """(CTAs, CTAs that run at once) of a Gluon family's launch at M: its grid, and CTAS an SM over the SMs.
    None for the other families (their CTAs an SM are the hardware's to decide)."""
    p = {**FAMILY_DEFAULTS.get(family, {}), **params}
    at_once = p.get("CTAS", 1) * num_sms
    if family in ("rsmma", "rsmmapf"):
        grid, _ = gluon_grid(M, N, K, p["BM"], p["BN"], p["BK"], p["SPLIT_K"], at_once)
    elif family == "twotile":
        grid, _ = twotile_grid(M, N, K, p["BM"], p["LO"], p["BN"], p["BK"], p["SPLIT_K"], at_once)
    else:
        return None
    return grid[0] * grid[1] * grid[2], at_once


def twotile_grid(M: int, N: int, K: int, HI: int, LO: int, BN: int, BK: int, split_k: int,
                 ctas_at_once: int) -> tuple[tuple[int, int, int], int]:
    """twotile's launch grid (1-D: its kernel takes equal runs of all tiles' blocks, CTA c the units
    [c U / P, (c + 1) U / P)) and the most partial tiles one tile gathers. A CTA a tile (SPLIT_K=1);
    stream-K over the CTAs that run at once (0); or SPLIT_K CTAs a tile, the same machinery with P = tiles x
    SPLIT_K, so that each CTA takes a split's run of blocks (its partial through the same reduction)."""
    tiles = cdiv(M, HI + LO) * cdiv(N, BN)
    if split_k == 1:
        return (tiles, 1, 1), 1
    return gluon_grid(M, N, K, HI + LO, BN, BK, STREAM_K, ctas_at_once if split_k == STREAM_K else tiles * split_k)


def chunk_columns(params, N: int, K: int) -> int:
    """Columns per chunk of the dqchunk family: as many whole BN tiles as fit MB megabytes of fp16
    [K, columns] (at least one tile), at most N."""
    tiles = max(1, (params["MB"] << 20) // (2 * K * params["BN"]))
    return min(N, tiles * params["BN"])


def packed_blocks_held(params) -> int:
    """Packed blocks a gemv thread holds at once: the current one, plus the prefetched one."""
    return 1 + (params["num_stages"] > 1)


def _pruned(variant: Variant, M, N, K, limits) -> str | None:
    p = variant.params
    split_k = p.get("SPLIT_K", 1)
    if split_k > 1:
        blocks = K // p["BK"]
        used = cdiv(blocks, cdiv(blocks, split_k))
        # a few empty splits cost little (they add a zero partial): on the H200 the M=1 gemv with
        # 29 of 32 splits used (K=11008, BK=64) beat every config the sweep had tried there
        if 4 * used < 3 * split_k:
            return f"SPLIT_K={split_k} leaves {split_k - used} of its splits of {blocks} K blocks empty"
    if variant.family == "dqchunk" and chunk_columns(p, N, K) >= N:
        return f"one chunk of {p['MB']} MB covers N={N}: that is the dequant family"
    if variant.family in CUBLAS_FAMILIES:
        if M < DEQUANT_MIN_M:
            return f"dequant-then-cuBLAS is for M >= {DEQUANT_MIN_M}"
        if p["BN"] > max(64, next_pow2(N)):
            return f"BN={p['BN']} is wider than N={N} needs"
        return None
    bm, bn = p["BM"], p["BN"]
    if variant.family == "twotile":
        if not bm < M <= bm + p["LO"]:
            return f"twotile's {bm} + {p['LO']} token tile is for {bm} < M <= {bm + p['LO']}, got M={M}"
        if bn > max(64, next_pow2(N)):
            return f"BN={bn} is wider than N={N} needs"
        tiles = cdiv(N, bn)  # one token tile holds M
        if split_k > 1 and tiles >= limits.num_sms:
            return f"{tiles} tiles already fill {limits.num_sms} SMs; split-K only adds traffic"
        return _ctas_pruned(p, K, tiles, bm + p["LO"], limits)
    if variant.family in ("dqmma", "rsmma", "rsmmapf"):
        lo, hi = {"dqmma": DQMMA_M, "rsmma": RSMMA_M, "rsmmapf": RSMMAPF_M}[variant.family]
        if not lo <= M <= hi:
            return f"{variant.family} is for {lo} <= M <= {hi}, got M={M}"
        # dqmma's wgmma takes 64 tokens a warp group; rsmma's token tile is the wgmma N (16 and up)
        widest = max(64 if variant.family == "dqmma" else 16, next_pow2(M))
        if bm > widest:
            return f"BM={bm} exceeds {widest}, the widest token tile M={M} needs"
        if bm == 8 and M > 8:
            return f"BM=8 is for M <= 8 (one tile; two of 8 would stream the weights twice), got M={M}"
        # each token tile streams all of W again (at M=48 two tiles of 32 took 23.4 us, one of 64 20.0, row 57)
        if bm < 64 and cdiv(M, bm) > 2:
            return f"BM={bm} reads the weights {cdiv(M, bm)} times at M={M}"
        if bn > max(64, next_pow2(N)):
            return f"BN={bn} is wider than N={N} needs"
        tiles = cdiv(M, bm) * cdiv(N, bn)
        if split_k > 1 and tiles >= 4 * limits.num_sms:
            return f"{tiles} tiles already fill {limits.num_sms} SMs; split-K only adds traffic"
        if variant.family == "rsmma":
            return _ctas_pruned(p, K, tiles, bm, limits)
        if variant.family == "rsmmapf":
            return _ctas_pruned(p, K, tiles, bm, limits, rsmmapf_extra_bytes(bm, bn, split_k, p["RING"]))
        return None
    if variant.family == "gemv":
        if M > GEMV_MAX_M:
            return f"gemv is for M <= {GEMV_MAX_M}, got M={M}"
        if bm > next_pow2(M):
            return f"BM={bm} exceeds next_pow2(M)={next_pow2(M)}"
        if bn > max(64, next_pow2(N)):
            return f"BN={bn} is wider than N={N} needs"
        return None
    if bm > max(16, next_pow2(M)):
        return f"BM={bm} exceeds max(16, next_pow2(M))={max(16, next_pow2(M))}"
    if variant.family == "swapab":
        if M > SWAPAB_MAX_M:
            return f"swapab is for M <= {SWAPAB_MAX_M}, got M={M}"
        if bn > max(64, next_pow2(N)):
            return f"BN={bn} is wider than N={N} needs"
    elif bn > max(32, next_pow2(N)):
        return f"BN={bn} is wider than N={N} needs"
    if variant.family == "gemm":
        if p["GROUP_M"] > 1 and cdiv(M, bm) == 1:
            return "GROUP_M > 1 with a single row of tiles is the same kernel as GROUP_M = 1"
        return None
    tiles = cdiv(M, bm) * cdiv(N, bn)
    if variant.family == "swapab" and split_k == 1:
        return None
    if tiles >= 4 * limits.num_sms:
        return f"{tiles} tiles already fill {limits.num_sms} SMs; split-K only adds traffic"
    return None


def _ctas_pruned(p, K: int, tiles: int, tokens: int, limits, extra: int = 0) -> str | None:
    """Why rsmma's, rsmmapf's (``extra`` shared bytes a CTA) or twotile's CTAS > 1 (CTAs an SM) cannot pay
    over ``tiles`` tiles of ``tokens`` token rows a ring slot: more CTAs an SM than run, or than fit, take
    registers for nothing in return."""
    if p["CTAS"] == 1:
        return None
    split_k = p["SPLIT_K"]
    ctas = K // p["BK"] * tiles if split_k == STREAM_K else tiles * split_k  # stream-K: one a block at most
    if ctas <= limits.num_sms:
        return f"{ctas} CTAs each have an SM of their own: CTAS={p['CTAS']} only takes registers"
    fit = rsmma_ctas_fit(tokens, p["BN"], p["BK"], p["num_stages"], limits, extra)
    if fit < p["CTAS"]:
        return f"{fit} of its rings fit an SM's shared memory, not CTAS={p['CTAS']}"
    return None


def family_space(family: str, M: int, N: int, K: int, group_size: int = 128,
                 device=None, layout: str = "base") -> Iterator[Variant]:
    if family not in LAYOUT_FAMILIES.get(layout, ()):  # every variant would be refused for it
        return
    grid = FAMILY_GRID[family]
    names = list(grid)
    for values in itertools.product(*(grid[n] for n in names)):
        variant = Variant(family, dict(zip(names, values)))
        if variant_error(variant, M, N, K, group_size, device, prune=True, layout=layout) is None:
            yield variant


def variant_space(M: int, N: int, K: int, group_size: int = 128, device=None, layout: str = "base") -> list[Variant]:
    """Every valid variant of every family for (M, N, K, G) on ``device`` (None: a Hopper part), with the
    weights in ``layout``."""
    limits = DeviceLimits.of(device)
    return [v for family in FAMILIES for v in family_space(family, M, N, K, group_size, limits, layout)]


# Preferred configs, best guess first; the first valid one of each family is its heuristic seed.
# The seeds start every sweep's search and serve untuned shapes at run time, so they follow what
# the H200 sweeps chose (benchmarks/results/trials_llama7b_h200_2026-11-30_s5.jsonl.gz):
# at M=1 the gemv with many small programs (SPLIT_K=32, 2 warps, BK=64, BN=256 on wide layers and 64
# on 4096-wide ones); at M=2..128 the swapab with enough splits for 1.5 programs per SM.
def _split_order(tiles: int, limits: DeviceLimits, choices=(1, 2, 4, 8, 16)):
    """Split factors: the smallest that gives 1.5 programs per SM first, then the smaller ones
    (largest first), then the larger ones."""
    fill = next((sk for sk in choices if 2 * tiles * sk >= 3 * limits.num_sms), choices[-1])
    return [fill] + sorted((sk for sk in choices if sk < fill), reverse=True) + [sk for sk in choices if sk > fill]


def _preferences(family: str, M: int, N: int, K: int, limits: DeviceLimits):
    mp = next_pow2(M)
    if family == "gemv":
        wide = 256 if N >= 8192 else 64
        for bk in (64, 32, 128, 256):
            for bn in dict.fromkeys((wide, 128, 256, 64, 512, 1024)):
                for warps in (2, 4, 8):
                    for sk in (32, 16, 8, 4, 2, 1):
                        yield dict(BM=mp, BN=bn, BK=bk, SPLIT_K=sk, num_warps=warps, num_stages=2)
    elif family == "splitk":
        for bm in (min(64, max(16, mp)), 16):
            for bn in (128, 64, 256, 32):
                for sk in (4, 8, 2, 16):
                    for bk in (64, 128, 32):
                        yield dict(BM=bm, BN=bn, BK=bk, SPLIT_K=sk, num_warps=4, num_stages=3)
    elif family == "swapab":
        bm = min(64, max(16, mp))
        for bn in (128, 64, 256):
            for sk in _split_order(cdiv(N, bn) * cdiv(M, bm), limits):
                for bk in (128, 256):
                    yield dict(BM=bm, BN=bn, BK=bk, SPLIT_K=sk, num_warps=4, num_stages=3)
    elif family == "dequant":
        for bk in (64, 32, 128):
            for bn in (128, 64, 256):
                yield dict(BK=bk, BN=bn, num_warps=4)
    elif family == "dqchunk":
        for mb in (16, 8, 32):
            for bk in (64, 32):
                yield dict(BK=bk, BN=128, MB=mb, num_warps=4)
    elif family == "rsmma":
        # The probes' winners first (rows 50-56). BM is M's tile. Where 64-column tiles outnumber the SMs,
        # two CTAs an SM of them (bm128.bn64.bk64.s4: 27.96 us at 4096x11008 M=128, below the one-CTA
        # tiles' 29.24; pruned where they would not share SMs). Then one warp group where N is small, BK=64
        # with 8 stages or 128 with 5, and two splits where the tiles fill at most half the SMs (64 tiles:
        # 2 beat 1 and 4; 86 tiles: 1 beat 2 by 1.4x and 3 by 1.3x).
        if M <= 32:  # the _s26-_s28 sweeps' winners at M=2..32 (rows 58, 61, 64): one token tile of 16 or
            # 32 (8 at M <= 8, row 67), BN=64, BK=128, the fewest splits that give two CTAs per SM (4096-wide
            # layers 4, 11008 and 12288 2, 22016 1), 3 CTAs an SM (where the partials are scaled after the
            # MMA, row 64) with 6 stages; then 2 and 4 of them, then row 56's BK=64 probe winner
            bm = 8 if M <= 8 else 16 if M <= 16 else 32
            tiles = cdiv(N, 64)
            fill = next((sk for sk in (1, 2, 4) if tiles * sk >= 2 * limits.num_sms), 4)
            # (stream-K, SPLIT_K=0, lost at every M <= 64 key of the _s29 anatomy, by 8-30%: row 65)
            for sk, stages, ctas in ((fill, 6, 3), (fill, 4, 2), (fill, 4, 4)):
                yield dict(BM=bm, BN=64, BK=128, SPLIT_K=sk, num_warps=4, num_stages=stages, CTAS=ctas)
            yield dict(BM=bm, BN=64, BK=64, SPLIT_K=1, num_warps=4, num_stages=6, CTAS=3)
        if M > 256:  # the _s35 sweep's winners (row 77; in-sample a median 1.00x the key's best, worst 1.15x
            # over 28 keys): 128-token tiles of one warp group at 2 CTAs an SM to M=512, then 256-token tiles of two, one split
            # (stream-K lost at every key: its reduction of 128 KB partials, row 79), 3 stages
            if M <= 512:
                yield dict(BM=128, BN=64, BK=128, SPLIT_K=1, num_warps=4, num_stages=3, CTAS=2)
            for bk, stages in ((64, 3), (128, 3), (64, 5)):
                yield dict(BM=256, BN=128, BK=bk, SPLIT_K=1, num_warps=8, num_stages=stages)
        bm = min(256, max(64, mp))
        for bk, stages in ((64, 4), (128, 3)):
            yield dict(BM=bm, BN=64, BK=bk, SPLIT_K=1, num_warps=4, num_stages=stages, CTAS=2)
        for bn in ((128, 64) if N >= 8192 else (64, 128)):
            tiles = cdiv(N, bn) * cdiv(M, bm)
            for sk in ((2, 1, 4) if 2 * tiles <= limits.num_sms else (1, 2, 4)):
                for bk, stages in ((64, 8), (128, 5), (64, 6)):
                    yield dict(BM=bm, BN=bn, BK=bk, SPLIT_K=sk, num_warps=bn // 16, num_stages=stages)
    elif family == "rsmmapf":  # rsmma's M <= 32 seeds, which split (row 132: the partials in the ring won
        # at two splits, level at four), in the ring first
        bm = 8 if M <= 8 else 16 if M <= 16 else 32 if M <= 32 else 64
        tiles = cdiv(N, 64) * cdiv(M, bm)
        fill = next((sk for sk in (2, 4) if tiles * sk >= 2 * limits.num_sms), 4)
        for ring in (1, 0):
            for stages, ctas in ((6, 3), (4, 2), (4, 4)):
                yield dict(BM=bm, BN=64, BK=128, SPLIT_K=fill, num_warps=4, num_stages=stages, CTAS=ctas, RING=ring)
    elif family == "twotile":  # the experiment's winners (NOTES.md row 91): the narrowest LO that holds M,
        # BN=64, 4 stages at the most CTAs an SM, then 6 at fewer, then stream-K; two splits first where the
        # column tiles fill at most half the SMs (rsmma's rule, row 52; untimed for twotile)
        hi = 64 if M <= 96 else 128
        lo = next((lo for lo in (8, 16, 32, 64) if M <= hi + lo), 64)
        most = TWOTILE_CTAS[(hi, 64)]
        few = 2 * cdiv(N, 64) <= limits.num_sms
        for sk, stages, ctas in ((2, 6, 1),) * few + ((1, 4, most), (1, 6, most - 1), (STREAM_K, 4, most)):
            yield dict(BM=hi, LO=lo, BN=64, BK=64, SPLIT_K=sk, num_warps=4, num_stages=stages, CTAS=ctas)
    elif family == "dqmma":  # row 45's winners first: bk128 with 4 stages; a split where tiles are few
        for bm in ((128, 64) if M > 64 else (64,)):
            tiles = cdiv(N, 128) * cdiv(M, bm)  # one split won at 86 tiles on 132 SMs (34.8 vs 49.7 us)
            splits = (1, 2, 4) if 2 * tiles >= limits.num_sms else _split_order(tiles, limits, (1, 2, 4))
            if tiles > limits.num_sms:  # over one wave: stream-K (row 49: 172 tiles, 67.2 -> 57.5 us)
                splits = (STREAM_K,) + splits
            for sk in splits:
                for bk, stages in ((128, 4), (64, 6), (128, 3)):
                    yield dict(BM=bm, BN=128, BK=bk, SPLIT_K=sk, num_warps=bm // 16, num_stages=stages)
    else:
        for bm in (min(128, max(16, mp)), 64, 32, 16):
            for bn in (128, 256, 64, 32):
                for bk in (64, 32, 128):
                    for warps in (8, 4):
                        yield dict(BM=bm, BN=bn, BK=bk, GROUP_M=8 if cdiv(M, bm) > 1 else 1,
                                   num_warps=warps, num_stages=3)


def heuristic_variants(M: int, N: int, K: int, group_size: int = 128, device=None,
                       layout: str = "base") -> list[Variant]:
    """One sensible valid variant per applicable family (reading ``layout``), best guess first."""
    limits = DeviceLimits.of(device)
    # best guess first: the H200 tables pick gemv at M=1, swapab up to M=128, dequantize-then-cuBLAS above
    if M == 1:
        order = ("gemv", "swapab", "splitk", "gemm")
    elif M <= GEMV_MAX_M:
        order = ("swapab", "gemv", "splitk", "gemm")
    elif M <= 128:
        order = ("swapab", "dqmma", "gemm", "splitk", "dequant", "dqchunk")
    else:  # dqchunk last: not yet timed on a GPU
        order = ("dequant", "dqmma", "gemm", "swapab", "splitk", "dqchunk")
    if RSMMA_M[0] <= M <= RSMMA_M[1]:  # it beat every other family on the H200 at M=2..256 (rows 50-64),
        at = 1 if M == 1 else 0  # and 2 of 5 shapes at M=1: after the gemv there
        order = order[:at] + ("rsmma", "twotile", "rsmmapf") + order[at:]
    seeds = []
    for family in order:
        for params in _preferences(family, M, N, K, limits):
            variant = Variant(family, params)
            if variant_error(variant, M, N, K, group_size, limits, prune=True, layout=layout) is None:
                seeds.append(variant)
                break
    return seeds


def family_twins(variant: Variant) -> list[Variant]:
    """``variant`` in the families whose kernel is its family's with more parameters: a split rsmma launch
    as rsmmapf, its partials in the ring first (row 132's winner at two splits), then in a buffer of their
    own. A key's best is worth timing that way first (``search.later_parameter_twins``)."""
    if variant.family == "rsmma" and variant["SPLIT_K"] >= 2:
        return [Variant("rsmmapf", {**variant.params, "RING": ring}) for ring in (1, 0)]
    return []


def spread_variants(M: int, N: int, K: int, group_size: int = 128, device=None,
                    per_family: int = 4, layout: str = "base") -> list[Variant]:
    """Starting points for a search: per family, its heuristic seed, then the valid variants
    farthest (in log2 parameter steps) from those already chosen, so every family's space is
    sampled at its corners before a model is fitted. Ordered round by round (every family's seed
    first, best guess first, then every family's first corner, ...), so that a search that can
    afford only the first few still starts every family."""
    limits = DeviceLimits.of(device)
    per_family_picks: list[list[Variant]] = []
    for seed in heuristic_variants(M, N, K, group_size, limits, layout):
        family = [v for v in family_space(seed.family, M, N, K, group_size, limits, layout)]
        picks = [seed]
        logs = {v: [param_steps(x) for x in v.params.values()] for v in family}
        while len(picks) < min(per_family, len(family)):
            far = max(family, key=lambda v: (min(sum(abs(a - b) for a, b in zip(logs[v], logs[p]))
                                                 for p in picks), v.id))
            picks.append(far)
        per_family_picks.append(picks)
    return [picks[i] for i in range(per_family) for picks in per_family_picks if i < len(picks)]
