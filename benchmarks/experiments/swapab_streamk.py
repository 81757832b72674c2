"""EXPERIMENT (not a tunesearch variant yet): a persistent stream-K swapab.

The layout probe (NOTES.md row 13) found the shipped kernels' gap to the streaming floor in their
structure: hundreds of short programs, each refilling its pipeline and ending in a split-K
handshake. Here a fixed grid of P programs (a few per SM) splits the flattened iteration space
[N tiles x K blocks] evenly; each program walks its contiguous range with one loop (so one
software pipeline runs across tile boundaries), and at the end of each tile, or of its range,
hands the tile's fp32 partial over: alone on the tile it stores fp16; otherwise it writes the
partial to slot (program - first program on the tile) and the last to arrive (a counter per tile,
re-armed by it) sums the slots in slot order (deterministic) and stores. A tile has at most
MAX_SLOTS contributors (the launcher computes it from P), so the sum is unrolled and the loop has
no inner loop that would keep Triton from pipelining it.
Same math and helpers as the shipped swapab (eight nibble-plane dots per block). Not yet timed.
"""
import torch
import triton
import triton.language as tl

from tunesearch.variants.swapab import _activation_planes, _nibble_planes


@triton.jit
def _program_of(x, P, total):
    """The program whose range [p total // P, (p + 1) total // P) holds iteration x."""
    return ((x + 1) * P + total - 1) // total - 1


@triton.jit
def swapab_streamk_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    MAX_SLOTS: tl.constexpr, PTX: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    pid = tl.program_id(0)
    pid_m = tl.program_id(1)
    P = tl.num_programs(0)
    blocks = K // BK  # K blocks per tile
    total = tl.cdiv(N, BN) * blocks
    start = pid * total // P
    end = (pid + 1) * total // P

    offs_m = pid_m * BM + tl.arange(0, BM)
    mask_m = offs_m < M
    offs_k8 = tl.arange(0, BK8)
    acc = tl.zeros([BN, BM], dtype=tl.float32)
    for i in range(start, end):
        tile = i // blocks
        kb = i % blocks
        k = kb * BK
        offs_n = tile * BN + tl.arange(0, BN)
        mask_n = offs_n < N
        packed = tl.load(b_ptr + offs_n[:, None] * stride_bn + (kb * BK8 + offs_k8)[None, :] * stride_bk,
                         mask=mask_n[:, None], other=0)
        a_planes = _activation_planes(a_ptr, offs_m, mask_m, k, stride_am, stride_ak, BM, BK)
        w_planes = _nibble_planes(packed, PTX)
        block = tl.zeros([BN, BM], dtype=tl.float32)
        for j in tl.static_range(8):
            block = tl.dot(w_planes[j], a_planes[j], block)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        acc += block * s.to(tl.float32)[:, None]
        if (kb == blocks - 1) | (i == end - 1):  # this program's part of the tile is done
            first = _program_of(tile * blocks, P, total)
            count = _program_of(tile * blocks + blocks - 1, P, total) - first + 1
            out = tl.trans(acc)  # [BM, BN]
            mask = mask_m[:, None] & mask_n[None, :]
            # alone on the tile: the fp16 output; else the fp32 partial in this program's slot
            tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
                     out.to(c_ptr.dtype.element_ty), mask=mask & (count == 1))
            tl.store(ws_ptr + (pid - first) * M * N + offs_m[:, None] * N + offs_n[None, :], out,
                     mask=mask & (count > 1))
            acc = tl.zeros([BN, BM], dtype=tl.float32)

    # the handshakes, after the loop (inside it they kept Triton from pipelining the loads)
    tl.debug_barrier()  # every thread's partials are written before the releases below
    for tile in range(start // blocks, (end - 1) // blocks + 1):
        first = _program_of(tile * blocks, P, total)
        count = _program_of(tile * blocks + blocks - 1, P, total) - first + 1
        if count > 1:
            tile_id = pid_m * tl.cdiv(N, BN) + tile
            arrived = tl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
            if arrived == count - 1:
                offs_n = tile * BN + tl.arange(0, BN)
                mask = mask_m[:, None] & (offs_n < N)[None, :]
                ws_ptrs = ws_ptr + offs_m[:, None] * N + offs_n[None, :]
                total_ = tl.zeros([BM, BN], dtype=tl.float32)
                for slot in tl.static_range(MAX_SLOTS):
                    # .cg: read at L2, where the other SMs' partials are
                    total_ += tl.load(ws_ptrs + slot * M * N, mask=mask & (slot < count), other=0.0,
                                      cache_modifier=".cg")
                tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
                         total_.to(c_ptr.dtype.element_ty), mask=mask)
                tl.atomic_xchg(lock_ptr + tile_id, 0)


def max_slots(tiles: int, blocks: int, programs: int) -> int:
    """The most programs that share one tile when ``programs`` split tiles x blocks iterations evenly."""
    total = tiles * blocks
    prog = lambda x: ((x + 1) * programs + total - 1) // total - 1  # noqa: E731
    return max(prog(t * blocks + blocks - 1) - prog(t * blocks) + 1 for t in range(tiles))


def streamk_launcher(a, packed, scales, out, group_size=128, BM=16, BN=128, BK=128, programs=264,
                     num_warps=4, num_stages=3, ptx=None):
    """A no-argument launch of the stream-K swapab on these operands; its workspace and counters are
    allocated here, once, so that a CUDA graph of the launch holds the kernel alone."""
    from tunesearch.variants.api import interpreting

    M, K = a.shape
    N = packed.shape[1]
    tiles, blocks = triton.cdiv(N, BN), K // BK
    programs = max(1, min(programs, tiles * blocks))
    slots = max_slots(tiles, blocks, programs)
    tiles_m = triton.cdiv(M, BM)
    ws = torch.empty(slots, M, N, dtype=torch.float32, device=a.device)
    locks = torch.zeros(tiles_m * tiles, dtype=torch.int32, device=a.device)
    args = (a, packed, scales, out, ws, locks, M, N, K, a.stride(0), a.stride(1), packed.stride(0),
            packed.stride(1), scales.stride(0), scales.stride(1), out.stride(0), out.stride(1))
    meta = dict(GROUP=group_size, BM=BM, BN=BN, BK=BK, MAX_SLOTS=slots,
                PTX=not interpreting() if ptx is None else ptx, num_warps=num_warps, num_stages=num_stages)
    return lambda: swapab_streamk_kernel[(programs, tiles_m)](*args, **meta)


def streamk_matmul(a, packed, scales, group_size=128, out=None, **config):
    """C = a @ dequantize(packed, scales) by the stream-K swapab (``config``: streamk_launcher's)."""
    if out is None:
        out = torch.empty(a.shape[0], packed.shape[1], dtype=torch.float16, device=a.device)
    streamk_launcher(a, packed, scales, out, group_size, **config)()
    return out
