"""The entry points: ``matmul`` (check, allocate, launch) and ``reference_matmul``."""
from __future__ import annotations

import functools

import torch
import triton

from .dequant import dequant_kernel
from .dequant_frag32 import dequant_frag32_kernel
from .gemm import gemm_kernel
from .gemv import a_pairs_ok, gemv_kernel
from .layout import check_packed, dequantize, layout_of
from .swapab import swapab_kernel
from .space import (CUBLAS_FAMILIES, GLUON_FAMILIES, DeviceLimits, Variant, cdiv, chunk_columns, gluon_grid,
                    interpreting, twotile_grid, variant_error)

# Split-K arrival counters, per device and stream. Each launch leaves them at zero (the last split
# re-arms its tile's counter), so one zeroed buffer serves every launch of a stream, whose kernels run
# in turn; kernels of two streams may run at once, and sharing counters they would count each other's
# arrivals. A buffer only grows, and one it outgrows is kept: a CUDA graph captured over it still
# counts in it on every replay.
_split_k_locks: dict[tuple[torch.device, int], torch.Tensor] = {}
_outgrown_locks: list[torch.Tensor] = []
# Zeroed counters made ahead, per device, for a stream first seen during a CUDA graph capture: there a
# torch.zeros is only recorded into the graph being captured, so its memory stays unwritten until that
# graph replays, and another graph captured later over the same counters (no zeroing of its own) would
# count in whatever the memory held if replayed first (graphs per batch size, replayed in any order).
# Refilled, and made ready, by the next launch outside a capture.
# a capture stream and the side streams of split calls (dispatch._sides: 2 + 3 for plans of two and of
# three launches), all first seen in one run of captures with no launch outside one between them: 16 KB each
SPARE_LOCKS = 8
LOCKS_SIZE = 4096  # counters a buffer holds at least
_spare_locks: dict[torch.device, list[torch.Tensor]] = {}
# SMs per device: dqmma's stream-K grid
_sm_counts: dict[torch.device, int] = {}


def _locks(device: torch.device, count: int, stream: int | None = None) -> torch.Tensor:
    """At least ``count`` zeroed split-K arrival counters for launches on ``stream`` (a raw CUDA stream
    handle, as Triton's launcher takes it; None: the current stream) of ``device``."""
    if stream is None:
        stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    locks, spares = _split_k_locks.get((device, stream)), _spare_locks.setdefault(device, [])
    if locks is not None and locks.numel() >= count and len(spares) >= SPARE_LOCKS:
        return locks
    capturing = _capturing(device)
    if locks is None or locks.numel() < count:
        if locks is not None:
            _outgrown_locks.append(locks)
        # in a capture, counters zeroed ahead, outside it (SPARE_LOCKS), where one is large enough
        fits = next((i for i, spare in enumerate(spares) if spare.numel() >= count), None) if capturing else None
        if fits is not None:
            locks = spares.pop(fits)
        else:
            locks = torch.zeros(max(count, LOCKS_SIZE), dtype=torch.int32, device=device)
        _split_k_locks[(device, stream)] = locks
    if not capturing and len(spares) < SPARE_LOCKS:  # those a capture took, made at the next launch outside one
        spares += [torch.zeros(LOCKS_SIZE, dtype=torch.int32, device=device)
                   for _ in range(SPARE_LOCKS - len(spares))]
        if device.type == "cuda":  # written before any stream, or a graph captured on one, counts in them
            torch.cuda.current_stream(device).synchronize()
    return locks


def _capturing(device: torch.device) -> bool:
    """A CUDA graph is being captured on the current stream of ``device``."""
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def check_inputs(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group_size: int):
    """Validate a matmul's operands; returns (M, N, K). Raises ValueError naming the problem. M may be 0 (as
    in ``torch.mm``: an empty batch, an expert no token was routed to); the result is then empty."""
    if not isinstance(a, torch.Tensor):
        raise ValueError(f"a must be a torch.Tensor, got {type(a).__name__}")
    if a.dim() != 2:
        raise ValueError(f"a must be 2-D [M, K], got shape {tuple(a.shape)}")
    if a.dtype != torch.float16:
        raise ValueError(f"a must be float16, got {a.dtype}")
    K, N = check_packed(packed, scales, group_size)
    if a.shape[1] != K:
        raise ValueError(f"a has K={a.shape[1]} but packed holds K={K} (packed is [K/8, N], or [K/32, 4N] in "
                         "layout frag32)")
    if a.device != packed.device:
        raise ValueError(f"a is on {a.device} but packed on {packed.device}")
    for name, t in (("packed", packed), ("scales", scales)):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (repack once at load, not per call)")
    return a.shape[0], N, K


def _launch_dequant(p, a, packed, scales, out, group_size, warmup, cols):
    """dequant (``cols`` = N) and dqchunk: per chunk of ``cols`` columns, expand it into the fp16
    workspace, then cuBLAS into the matching columns of ``out`` (a strided view for a chunk: cuBLAS
    takes its row stride). The workspace is the call's own, from PyTorch's caching allocator (a
    cached block, no copy, no clearing): launches in two streams, or a CUDA graph and the calls after
    its capture, never share it. (It was one buffer per device: two streams could write their weights
    into it at once, and a larger shape replaced and freed it under a graph captured over it.)"""
    K, N = a.shape[1], scales.shape[1]
    buf = torch.empty(K * cols, dtype=torch.float16, device=a.device)
    meta = dict(GROUP=group_size, BK=p["BK"], BN=p["BN"], num_warps=p["num_warps"])
    frag32 = layout_of(packed, scales) == "frag32"  # the dequant family only (dqchunk reads base)
    for c0 in range(0, N, cols):
        width = min(cols, N - c0)
        w = buf[: K * width].view(K, width)
        if frag32:
            kernel = dequant_frag32_kernel
            args = (packed, scales, w, width, packed.stride(0), scales.stride(0), scales.stride(1), w.stride(0),
                    w.stride(1))
        else:
            kernel = dequant_kernel
            args = (packed[:, c0:c0 + width], scales[:, c0:c0 + width], w, width, packed.stride(0),
                    packed.stride(1), scales.stride(0), scales.stride(1), w.stride(0), w.stride(1))
        grid = (K // p["BK"], cdiv(width, p["BN"]))
        if warmup:
            kernel.warmup(*args, grid=grid, **meta)
            continue
        kernel[grid](*args, **meta)
        torch.matmul(a, w, out=out[:, c0:c0 + width])
    return None if warmup else out


def tma_aligned(t: torch.Tensor) -> bool:
    """An operand the Gluon families' TMA can read as it is: unit column stride, 16-byte aligned base and rows."""
    return t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """``t`` if TMA can read it as it is, else an aligned contiguous copy (a column slice of the weights
    with unaligned rows: correct, and slow, since the copy is made per call)."""
    return t if tma_aligned(t) else torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t)


def _sm_count(device: torch.device) -> int:
    count = _sm_counts.get(device)
    if count is None:
        count = _sm_counts[device] = DeviceLimits.of(device).num_sms
    return count


def _gluon_args(descriptors, a, packed, scales, out, bm: int, bn: int, bk: int, tiles: int, parts: int,
                counters: int | None = None):
    """A Gluon family's runtime arguments: TMA descriptors of A, packed W and the scales (over aligned
    copies where TMA cannot read them as they are), C, and, when a tile gathers ``parts`` > 1 partials,
    a workspace of that many fp32 [BM, BN] slots per tile and the arrival counters (``counters``, default
    one a tile)."""
    M, K = a.shape
    N = scales.shape[1]  # packed is 4N wide in layout frag32
    if parts > 1:
        workspace = torch.empty(tiles * parts * bm * bn, dtype=torch.float32, device=a.device)
        locks = _locks(a.device, tiles if counters is None else counters)
    else:
        workspace = locks = out  # unused by the kernel when no tile is split
    return (*descriptors(_tma_ready(a), _tma_ready(packed), _tma_ready(scales), bm, bn, bk),
            out, workspace, locks, M, N, K, out.stride(0), out.stride(1))


def _gluon_descriptors(family: str, packed, scales):
    """The TMA descriptor builder ``(a, packed, scales, BM, BN, BK)`` of a Gluon family's launch, for the
    layout the weights are in (rsmma reads both; its fragment builder follows, ``_rsmma_call``)."""
    if family == "dqmma":
        from .dqmma import descriptors
        return descriptors
    from . import rsmma
    return rsmma.frag32_descriptors if layout_of(packed, scales) == "frag32" else rsmma.descriptors


def _dqmma_call(p, a, packed, scales, out, group_size: int):
    """dqmma's kernel, grid, arguments and meta: its workspace holds fp32 [BM, BN] partial tiles, as
    many slots per tile as one tile gathers (``gluon_grid``); the TMA descriptors hold the base
    addresses, so they are built per call."""
    from .dqmma import dqmma_kernel, launch_registers

    M, K = a.shape
    N = scales.shape[1]
    bm, bn, bk = p["BM"], p["BN"], p["BK"]
    grid, parts = gluon_grid(M, N, K, bm, bn, bk, p["SPLIT_K"], _sm_count(a.device))
    args = _gluon_args(_gluon_descriptors("dqmma", packed, scales), a, packed, scales, out, bm, bn, bk,
                       cdiv(M, bm) * cdiv(N, bn), parts)
    # at BN=256 the MMA warps issue the TMA themselves: 4 warps fewer, so the 168 registers a thread
    # that N=256's wgmma needs fit the SM at launch
    loads = bn == 256
    meta = dict(BM=bm, BN=bn, BK=bk, SPLIT_K=p["SPLIT_K"], MAX_PARTS=parts, STAGES=p["num_stages"],
                GROUP=group_size, num_warps=p["num_warps"], MMA_LOADS=loads,
                maxnreg=launch_registers(bm, mma_loads=loads))
    return dqmma_kernel, grid, args, meta


def _rsmma_call(p, a, packed, scales, out, group_size: int):
    """rsmma's kernel, grid, arguments and meta: a CTA per (column tile, split, token tile), or stream-K's
    CTAs (CTAS an SM); where tiles are split its workspace holds an fp32 [BN, BM] slot per part of each.
    The weights may be in either layout (their widths tell which: ``layout_of``)."""
    from . import rsmma
    from .rsmma_launch import launch_registers, scale_after, staged_split

    M, K = a.shape
    N = scales.shape[1]
    bm, bn, bk, split_k, warps = p["BM"], p["BN"], p["BK"], p["SPLIT_K"], p["num_warps"]
    grid, parts = gluon_grid(M, N, K, bm, bn, bk, split_k, p["CTAS"] * _sm_count(a.device))
    if layout_of(packed, scales) == "frag32":
        fragment, words = rsmma.frag32_fragment, rsmma.frag32_word_layout
    else:
        fragment, words = rsmma.fragment, rsmma.word_layout
    args = _gluon_args(_gluon_descriptors("rsmma", packed, scales), a, packed, scales, out, bm, bn, bk,
                       cdiv(M, bm) * cdiv(N, bn), parts)
    meta = dict(GROUP=group_size, BM=bm, BK=bk, SPLIT_K=split_k, MAX_PARTS=parts, STAGES=p["num_stages"],
                WORDS=words(bk, warps), FRAGMENT=fragment, PAIRED_ROWS=True, PARTS=rsmma.ALL_PARTS, STAGED_C=True,
                SKEW=p["SKEW"], OWNER_FIRST=p["SKEW"] > 0,
                STAGED_SPLIT=staged_split(bn, bk, p["num_stages"], split_k), A_TAIL=rsmma.a_tail(M, bm),
                num_warps=warps, maxnreg=launch_registers(warps, p["CTAS"]))
    meta["SCALE_AFTER"] = scale_after(bn, bm, bk, meta["maxnreg"])
    return rsmma.rsmma_kernel, grid, args, meta


def _rsmmapf_call(p, a, packed, scales, out, group_size: int):
    """rsmmapf's launch: rsmma's (the same grid, arguments and meta, the rsmma variant of its other
    parameters) with the family's kernel, its loader's partials in the ring's A stages where RING is 1
    (space._rsmmapf_error: a split launch that reduces through the drained ring)."""
    from .rsmmapf import POLLS, rsmmapf_kernel

    _, grid, args, meta = _rsmma_call({k: v for k, v in p.items() if k != "RING"}, a, packed, scales, out, group_size)
    return rsmmapf_kernel, grid, args, dict(meta, IN_RING=bool(p["RING"]), POLLS_=POLLS)


def _twotile_call(p, a, packed, scales, out, group_size: int):
    """twotile's kernel, grid, arguments and meta (frag32 weights only): a CTA per (column tile, token tile
    of HI + LO), stream-K's CTAS an SM, or SPLIT_K CTAs a tile (``space.twotile_grid``); where tiles are
    split, the workspace holds each part's fp32 slots
    [BN, HI] of every tile, then their [BN, LO] ones, and the counters two a tile (HI's, then LO's)."""
    from . import rsmma, twotile
    from .rsmma_launch import launch_registers

    M, K = a.shape
    N = scales.shape[1]
    hi, lo, bn, bk, warps = p["BM"], p["LO"], p["BN"], p["BK"], p["num_warps"]
    grid, parts = twotile_grid(M, N, K, hi, lo, bn, bk, p["SPLIT_K"], p["CTAS"] * _sm_count(a.device))
    tiles = cdiv(M, hi + lo) * cdiv(N, bn)
    args = _gluon_args(lambda a, packed, scales, bm, bn, bk: twotile.descriptors(a, packed, scales, hi, lo, bn, bk),
                       a, packed, scales, out, hi + lo, bn, bk, tiles, parts, counters=2 * tiles)
    meta = dict(GROUP=group_size, LO=lo, BK=bk, STAGES=p["num_stages"], WORDS=rsmma.frag32_word_layout(bk, warps),
                FRAGMENT=rsmma.frag32_fragment, MAX_PARTS=parts, num_warps=warps,
                maxnreg=launch_registers(warps, p["CTAS"]))
    return twotile.two_tile_kernel, grid, args, meta


def _kernel_call(variant: Variant, a, packed, scales, out, group_size: int):
    """The Triton kernel, grid, runtime arguments and meta-parameters of one launch."""
    M, K = a.shape
    N = scales.shape[1]
    p = variant.params
    if variant.family == "dqmma":  # Gluon: imported only where the family can run
        return _dqmma_call(p, a, packed, scales, out, group_size)
    if variant.family == "rsmma":
        return _rsmma_call(p, a, packed, scales, out, group_size)
    if variant.family == "rsmmapf":
        return _rsmmapf_call(p, a, packed, scales, out, group_size)
    if variant.family == "twotile":
        return _twotile_call(p, a, packed, scales, out, group_size)
    split_k = p.get("SPLIT_K", 1)
    tiles_m, tiles_n = cdiv(M, p["BM"]), cdiv(N, p["BN"])
    if split_k > 1:
        workspace = torch.empty((split_k, M, N), dtype=torch.float32, device=a.device)
        locks = _locks(a.device, tiles_m * tiles_n)
    else:
        workspace = locks = out  # unused by the kernel when SPLIT_K == 1
    if variant.family == "gemv":
        kernel, grid = gemv_kernel, (tiles_n, split_k, tiles_m)
        # gemv pipelines its loop itself (registers); Triton's pipeliner has nothing to do
        meta = dict(BM=p["BM"], BN=p["BN"], BK=p["BK"], SPLIT_K=split_k, STAGES=p["num_stages"],
                    A_PAIRS=a_pairs_ok(a), PTX=not interpreting())
    elif variant.family == "swapab":
        kernel, grid = swapab_kernel, (tiles_n, split_k, tiles_m)
        meta = dict(BM=p["BM"], BN=p["BN"], BK=p["BK"], SPLIT_K=split_k, PTX=not interpreting())
    else:
        kernel, grid = gemm_kernel, (tiles_m * tiles_n, split_k, 1)
        meta = dict(BM=p["BM"], BN=p["BN"], BK=p["BK"], GROUP_M=p.get("GROUP_M", 1), SPLIT_K=split_k)
    args = (a, packed, scales, out, workspace, locks, M, N, K,
            a.stride(0), a.stride(1), packed.stride(0), packed.stride(1),
            scales.stride(0), scales.stride(1), out.stride(0), out.stride(1))
    meta.update(GROUP=group_size, num_warps=p["num_warps"],
                num_stages=1 if variant.family == "gemv" else p["num_stages"])
    return kernel, grid, args, meta


def launch(variant: Variant, a, packed, scales, out, group_size: int, warmup: bool = False):
    """Launch ``variant`` on validated operands (no checks here: the hot path)."""
    if variant.family in CUBLAS_FAMILIES:
        N, K = scales.shape[1], a.shape[1]
        cols = N if variant.family == "dequant" else chunk_columns(variant.params, N, K)
        return _launch_dequant(variant.params, a, packed, scales, out, group_size, warmup, cols)
    kernel, grid, args, meta = _kernel_call(variant, a, packed, scales, out, group_size)
    if warmup:
        return kernel.warmup(*args, grid=grid, **meta)
    launch_kernel(kernel, grid, args, meta, variant.params.get("CLUSTER", 1))
    return out


def launch_kernel(kernel, grid, args, meta: dict, ctas: int = 1):
    """``kernel[grid](*args, **meta)``, or with ``ctas`` > 1 the same in clusters of that many CTAs along x
    (rsmma's CLUSTER: ``_launch_clustered``)."""
    if ctas > 1:
        _launch_clustered(kernel, grid, args, meta, ctas)
    else:
        kernel[grid](*args, **meta)


def cluster_meta(packed_meta: tuple, ctas: int) -> tuple:
    """A compiled kernel's packed launch metadata (num_warps, num_ctas, shared bytes: Triton 3.6's CUDA
    launcher) with clusters of ``ctas`` CTAs along the grid's x: that launcher sets the cluster dimension
    for num_ctas > 1 and launches x times num_ctas CTAs, so the caller passes x / ctas. The kernel itself
    is the one compiled for one CTA: a cluster here only groups neighbouring column tiles onto one GPC
    (rsmma's CLUSTER, NOTES.md row 89), nothing in the kernel reads it."""
    num_warps, _, shared = packed_meta
    return (num_warps, ctas, shared)


def _launch_clustered(kernel, grid, args, meta, ctas: int):
    """``kernel[grid](*args, **meta)`` in clusters of ``ctas`` along x: the compiled kernel's own launcher
    with ``cluster_meta`` (Triton's launch takes num_ctas only as a compile option, which changes the
    kernel's layouts), launch hooks called as Triton calls them."""
    compiled = kernel.warmup(*args, grid=grid, **meta)
    compiled._init_handles()
    stream = triton.runtime.driver.active.get_current_stream(args[3].get_device())  # C's device
    constexprs = _constexpr_values(kernel, meta)
    runtime = triton.knobs.runtime
    hooked = _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook)
    launch_metadata = compiled.launch_metadata(grid, stream, *args) if hooked else None
    compiled.run(grid[0] // ctas, grid[1], grid[2], stream, compiled.function,
                 cluster_meta(compiled.packed_metadata, ctas), launch_metadata,
                 runtime.launch_enter_hook if hooked else None, runtime.launch_exit_hook if hooked else None,
                 *args, *constexprs)


def _constexpr_values(kernel, meta: dict) -> tuple:
    """The values of ``kernel``'s constexpr parameters in a launch with ``meta`` (their defaults where
    ``meta`` has none), in the order the compiled kernel's own launcher takes them, after the arguments."""
    return tuple(meta.get(kernel.params[i].name, kernel.params[i].default) for i in kernel.constexprs)


def _hooked(hook) -> bool:
    """A launch hook is installed (Triton 3.6 keeps an empty HookChain when there is none)."""
    return bool(getattr(hook, "calls", hook))


def make_launcher(variant: Variant, a, packed, scales, out, group_size: int):
    """``launcher(a, packed, scales, out)`` for operands of these shapes, strides and dtypes.

    Triton's own launch path binds and specializes every argument on every call (about 30 us
    of Python on the H200's host). Here that is done once: the compiled kernel's launcher is
    called directly with the fixed integers. The one specialization that can change under a
    fixed shape and stride is pointer alignment (16 bytes), so a call with a misaligned
    operand, a launch hook installed (a profiler), or the interpreter takes the generic path.
    """
    generic = functools.partial(launch, variant, group_size=group_size)
    if interpreting() or variant.family in CUBLAS_FAMILIES or a.device.type != "cuda":
        return lambda a, packed, scales, out: generic(a, packed, scales, out)
    if variant.family in GLUON_FAMILIES:
        return _gluon_launcher(variant, a, packed, scales, out, group_size, generic)
    kernel, grid, args, meta = _kernel_call(variant, a, packed, scales, out, group_size)
    compiled = kernel.warmup(*args, grid=grid, **meta)
    compiled._init_handles()
    fixed = args[6:]  # M, N, K and the strides
    constexprs = tuple(meta[kernel.arg_names[i]] for i in kernel.constexprs)
    run, function, packed_meta = compiled.run, compiled.function, compiled.packed_metadata
    g0, g1, g2 = grid
    split_k, M, N = meta["SPLIT_K"], args[6], args[7]
    locks = args[5].numel() if split_k > 1 else 0  # the counters a launch needs, the stream's own
    device, torch_device = a.get_device(), a.device
    current_stream = triton.runtime.driver.active.get_current_stream
    runtime = triton.knobs.runtime

    def launcher(a, packed, scales, out):
        if ((a.data_ptr() | packed.data_ptr() | scales.data_ptr() | out.data_ptr()) & 15
                or _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook)):
            return generic(a, packed, scales, out)
        stream = current_stream(device)
        if split_k > 1:
            ws = torch.empty((split_k, M, N), dtype=torch.float32, device=a.device)
            run(g0, g1, g2, stream, function, packed_meta, None, None, None,
                a, packed, scales, out, ws, _locks(torch_device, locks, stream), *fixed, *constexprs)
        else:
            run(g0, g1, g2, stream, function, packed_meta, None, None, None,
                a, packed, scales, out, out, out, *fixed, *constexprs)
        return out

    return launcher


# Which operand (0: A, 1: the packed weights, 2: the scales) each TMA descriptor of a Gluon family's kernel
# reads, in its argument order (A's first): twotile reads A in boxes of HI rows and of LO rows
DESCRIPTOR_SOURCES = {"twotile": (0, 0, 1, 2)}


def _gluon_launcher(variant: Variant, a, packed, scales, out, group_size: int, generic):
    """``make_launcher``'s launcher for a Gluon family: compiled once, then per call only a split's fp32
    workspace is made before the compiled kernel's own launcher runs, with the TMA descriptors (boxes and
    layouts the first launch's) encoded once per operand address (``_EncodedDescriptors``). Triton's
    generic path (binding, specializing, hashing the constexpr layouts) took ~100 us of host time a call on
    the H200's host (NOTES.md row 69), and encoding three descriptors a call about a third of what was
    left (row 72). Operands TMA cannot read as they are (``tma_aligned``) take the generic path, which
    copies them."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    kernel, grid, args, meta = _kernel_call(variant, a, packed, scales, out, group_size)
    compiled = kernel.warmup(*args, grid=grid, **meta)
    compiled._init_handles()
    # the launch's descriptors give each operand's boxes and shared layouts: per call only new
    # descriptors over the same boxes (the builders make the layouts again each time, most of their cost)
    sources = DESCRIPTOR_SOURCES.get(variant.family, (0, 1, 2))
    n = len(sources)  # the descriptors come first, then C, the workspace, the counters, M, N, K
    boxes = [(d.block_shape, d.layout) for d in args[:n]]
    workspace = args[n + 1].numel() if args[n + 1] is not out else 0  # fp32 partial slots where tiles are split
    locks, fixed = args[n + 2].numel() if workspace else 0, args[n + 3:n + 6]  # the split counters, M, N, K
    constexprs = _constexpr_values(kernel, meta)
    run, function, packed_meta = compiled.run, compiled.function, compiled.packed_metadata
    g0, g1, g2 = grid
    ctas = variant.params.get("CLUSTER", 1)
    if ctas > 1:  # clusters of neighbouring column tiles (rsmma's CLUSTER)
        packed_meta, g0 = cluster_meta(packed_meta, ctas), g0 // ctas
    device, torch_device = a.get_device(), a.device
    current_stream = triton.runtime.driver.active.get_current_stream
    runtime = triton.knobs.runtime
    encoded = _EncodedDescriptors.of(run, boxes, sources)

    def launcher(a, packed, scales, out):
        if _hooked(runtime.launch_enter_hook) or _hooked(runtime.launch_exit_hook):
            return generic(a, packed, scales, out)
        if encoded is not None:  # encoded once per operand address; None where TMA cannot read one as it is
            descriptors = encoded.arguments(a, packed, scales)
        elif tma_aligned(a) and tma_aligned(packed) and tma_aligned(scales):
            operands = [(a, packed, scales)[i] for i in sources]
            descriptors = [TensorDescriptor(t, t.shape, t.stride(), box, layout)
                           for t, (box, layout) in zip(operands, boxes)]
        else:
            descriptors = None
        if descriptors is None:
            return generic(a, packed, scales, out)
        stream = current_stream(device)
        if workspace:
            ws = torch.empty(workspace, dtype=torch.float32, device=a.device)
            counters = _locks(torch_device, locks, stream)
        else:
            ws = counters = out
        rest = (out, ws, counters, *fixed, out.stride(0), out.stride(1), *constexprs)
        if encoded is not None:
            encoded.run(g0, g1, g2, stream, function, packed_meta, descriptors, rest)
        else:
            run(g0, g1, g2, stream, function, packed_meta, None, None, None, *descriptors, *rest)
        return out

    launcher.descriptors = encoded  # what the GPU tests look into
    return launcher


class _EncodedDescriptors:
    """The compiled Gluon kernel's launch with its TMA descriptors encoded once per operand tensor rather
    than every call: a CUtensorMap holds only an address, shape, strides, box and swizzle, so one made
    for a tensor's (address, shape, strides) is right for any tensor at that address with that shape and
    those strides (a freed address reused is no hazard). The weights' pair is kept per weight tensor;
    A's per address too, since a caller's activations come back to a few addresses (the caching
    allocator's, a static buffer's), which saves encoding it on most calls.

    This calls below Triton's launcher wrapper (Triton 3.6's CudaLauncher: its C launch, wrapped by
    ``wrap_handle_tensordesc``, which encodes every descriptor argument each call); ``of`` returns None
    where that wrapper is not as expected (another Triton), and the launcher then passes descriptors."""

    LIMIT = 4096  # weight tensors remembered (a Llama block has up to 7); then forgotten, all at once
    A_LIMIT = 64  # activation addresses remembered, likewise

    @classmethod
    def of(cls, run, boxes, sources=(0, 1, 2)):
        try:
            from triton.backends.nvidia.driver import _BASE_ARGS_FORMAT_LEN, make_tensordesc_arg

            inner = run.launch
            cells = dict(zip(inner.__code__.co_freevars, (c.cell_contents for c in inner.__closure__ or ())))
            raw, indices, metas = cells["launcher"], cells["tensordesc_indices"], cells["tensordesc_meta"]
        except (ImportError, AttributeError, KeyError, TypeError):
            return None
        scratch = run.global_scratch_size or run.profile_scratch_size
        n = len(sources)
        if set(indices) != set(range(n)) or len(metas) != n or _BASE_ARGS_FORMAT_LEN != 13 or scratch:
            return None
        return cls(raw, metas, boxes, make_tensordesc_arg, run.launch_cooperative_grid, run.launch_pdl, sources)

    def __init__(self, raw, metas, boxes, encode, cooperative, pdl, sources=(0, 1, 2)):
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        assert list(sources) == sorted(sources), "A's descriptors come first, then the weights'"
        self.raw, self.metas, self.boxes, self.encode = raw, metas, boxes, encode
        self.sources = sources
        self.flags = (cooperative, pdl, None, None)  # and no global or profile scratch
        self.descriptor = TensorDescriptor
        self.encoded: dict[tuple, list] = {}  # the weights' (address, shape, strides) -> their launch arguments
        self.encoded_a: dict[tuple, list] = {}  # A's (address, shape, strides) -> its launch arguments

    def _args(self, i: int, t: torch.Tensor) -> list:
        box, layout = self.boxes[i]
        return self.encode(self.descriptor(t, t.shape, t.stride(), box, layout), self.metas[i])

    def _operand_args(self, operands, first: int) -> list:
        """The launch arguments of every descriptor over operand ``first`` and those after it (``sources``)."""
        return [x for i, source in enumerate(self.sources) if source >= first and source < len(operands)
                for x in self._args(i, operands[source])]

    @staticmethod
    def _keep(cache: dict, limit: int, key, value):
        if len(cache) >= limit:  # forgotten all at once: a model's operands come back to few addresses
            cache.clear()
        cache[key] = value
        return value

    def arguments(self, a, packed, scales) -> list | None:
        """The C launch's arguments for the descriptors, or None where an operand is one TMA cannot
        read as it is (``tma_aligned``). Alignment is checked only when a descriptor is made: a cached one's
        address and strides, so its alignment, are those of the tensor that hits it."""
        key = (packed.data_ptr(), packed.shape, packed.stride(), scales.data_ptr(), scales.shape, scales.stride())
        weights = self.encoded.get(key)
        if weights is None:
            if not (tma_aligned(packed) and tma_aligned(scales)):
                return None
            weights = self._keep(self.encoded, self.LIMIT, key, self._operand_args((None, packed, scales), 1))
        key = (a.data_ptr(), a.shape, a.stride())
        a_args = self.encoded_a.get(key)
        if a_args is None:
            if not tma_aligned(a):
                return None
            a_args = self._keep(self.encoded_a, self.A_LIMIT, key, self._operand_args((a,), 0))
        return a_args + weights

    def run(self, g0, g1, g2, stream, function, packed_meta, descriptors, rest):
        """The C launch, ``descriptors`` from ``arguments``, ``rest`` the kernel's other arguments."""
        self.raw(g0, g1, g2, stream, function, *self.flags, packed_meta, None, None, None, *descriptors, *rest)


def matmul(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, variant: Variant,
           group_size: int = 128, out: torch.Tensor | None = None) -> torch.Tensor:
    """C [M, N] fp16 = a [M, K] fp16 @ W, W the int4 weights in ``packed``/``scales``.

    Accumulates in fp32 and rounds once to fp16: results beyond the fp16 range come out as
    +-inf (as with ``torch.matmul`` in fp16), never clamped or hidden; check ``isfinite`` if the
    activations may be that large.
    """
    if not isinstance(variant, Variant):
        raise ValueError(f"variant must be a Variant, got {type(variant).__name__}")
    M, N, K = check_inputs(a, packed, scales, group_size)
    if a.device.type != "cuda" and not interpreting():
        raise ValueError(f"the Triton kernels need CUDA tensors, got {a.device} "
                         "(use reference_matmul, or set TRITON_INTERPRET=1 for the interpreter)")
    reason = variant_error(variant, M, N, K, group_size, device=a.device, layout=layout_of(packed, scales)) \
        if M else None  # no rows: nothing to launch
    if reason:
        raise ValueError(f"variant {variant.id} cannot run M={M}, N={N}, K={K}, G={group_size}: {reason}")
    if out is None:
        out = torch.empty((M, N), dtype=torch.float16, device=a.device)
    elif out.shape != (M, N) or out.dtype != torch.float16 or out.device != a.device:
        raise ValueError(f"out must be float16 [{M}, {N}] on {a.device}, got {out.dtype} {tuple(out.shape)}")
    return launch(variant, a, packed, scales, out, group_size) if M else out


def reference_matmul(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor,
                     group_size: int = 128) -> torch.Tensor:
    """Dequantize, then matmul: the specification's answer, and the runtime's last fallback.

    On CUDA it is an fp16 matmul (fp32 accumulation in cuBLAS); on the CPU it computes in fp32
    and rounds to fp16 once.
    """
    check_inputs(a, packed, scales, group_size)
    w = dequantize(packed, scales, group_size)
    if a.device.type == "cuda":
        return a @ w
    return (a.float() @ w.float()).to(torch.float16)


def input_grad(grad_out: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor,
               group_size: int = 128) -> torch.Tensor:
    """dA = dC · Wᵀ for C = A · W with W frozen (packed integers have no gradient): what a matmul passes back
    to its activations (adapters trained on a quantized model, gradients for attribution), through the
    dequantized weights, made for the call (K × N fp16), in fp16 as ``reference_matmul`` computes."""
    w = dequantize(packed, scales, group_size)
    if grad_out.device.type == "cuda":
        return grad_out.to(torch.float16) @ w.t()
    return (grad_out.float() @ w.float().t()).to(torch.float16)
