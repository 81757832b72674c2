"""Swap-AB tensor-core GEMM for small M: computes C^T = W^T A^T, one nibble plane at a time.

At decode sizes (M <= 64) a [BM, BN] tile with BM = 16 can only use ``mma.sync``, and the
dequantized weights would have to be staged in shared memory as wgmma's B operand. Swapping the
operands makes the weights the *left* operand, [BN, BK] with BN >= 64 rows, which wgmma reads
from registers.

The K block is not unpacked into one [BN, BK] tile (a reshape, which Triton lowers to a trip
through shared memory). Instead nibble j of every packed int32 forms the plane
W_j[n, k8] = w[k0 + 8*k8 + j, n], and the block's product is the sum over j of eight dots
W_j [BN, BK/8] x A_j [BK/8, BM], A_j the activations at k = k0 + 8*k8 + j. Each W_j is an
elementwise function of the packed block, so Triton loads the packed int32 from shared memory
straight into wgmma's register-operand layout and unpacks there: no dequantized weight is ever
stored. Codes enter the dot as exact small integers (q - 8 in fp16); the group's scale multiplies
the [BN, BM] block product in fp32, once per block (so G must be a multiple of BK).

All eight planes of two neighbouring int32 (k8, k8 + 1) are unpacked into the fp16 pairs the dot
wants by one PTX block (PRMT, SHR, LOP3 with the 0x6400 magic, HSUB2/HFMA2): 1.25 instructions
per weight, where one plane at a time took 2 and Triton's own integer ops ~3.4. The interpreter
cannot run PTX, so it takes the plain-Triton spelling.

The activations of a block are one contiguous [BM, BK] load, split into the eight A_j in
registers (each thread holds eight consecutive k). Loaded as eight strided [BK/8, BM] slices
instead, Triton could not stage them with cp.async and each went through registers and shared
memory with its own barrier: on the H200 that form was 1.2-1.6x slower at M = 1..64.
"""
import triton
import triton.language as tl

from ._common import split_k_range, store_or_reduce_splitk


@triton.jit
def _nibble_planes_ptx(packed):
    # all eight planes of two neighbouring int32 x0, x1 at once: their low 16-bit halves side by
    # side (PRMT) hold nibbles 0-3 of each, the high halves 4-7; in each, nibble 0 (bits 0-3 and
    # 16-19) and nibble 1 (bits 4-7 and 20-23) are kept under the fp16 exponent of 1024 by one
    # LOP3 each: 1024 + q and 1024 + 16 q; shifted by 8 (SHR), the same two LOP3 give nibbles 2, 3.
    # Then 1024 + q - 1032 (HSUB2) and (1024 + 16 q) / 16 - 72 (HFMA2) are q - 8, exactly.
    # 20 instructions per 16 weights, where eight single-plane unpacks take 32.
    return tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 lo, hi, los, his, c1032, c16, c72;
        prmt.b32 lo, $8, $9, 0x5410;
        prmt.b32 hi, $8, $9, 0x7632;
        shr.b32 los, lo, 8;
        shr.b32 his, hi, 8;
        mov.b32 c1032, 0x64086408;
        mov.b32 c16, 0x2C002C00;
        mov.b32 c72, 0xD480D480;
        lop3.b32 $0, lo, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $1, lo, 0x00F000F0, 0x64006400, 0xEA;
        lop3.b32 $2, los, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $3, los, 0x00F000F0, 0x64006400, 0xEA;
        lop3.b32 $4, hi, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $5, hi, 0x00F000F0, 0x64006400, 0xEA;
        lop3.b32 $6, his, 0x000F000F, 0x64006400, 0xEA;
        lop3.b32 $7, his, 0x00F000F0, 0x64006400, 0xEA;
        sub.f16x2 $0, $0, c1032;
        fma.rn.f16x2 $1, $1, c16, c72;
        sub.f16x2 $2, $2, c1032;
        fma.rn.f16x2 $3, $3, c16, c72;
        sub.f16x2 $4, $4, c1032;
        fma.rn.f16x2 $5, $5, c16, c72;
        sub.f16x2 $6, $6, c1032;
        fma.rn.f16x2 $7, $7, c16, c72;
        }""",
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r,r", args=[packed],
        dtype=(tl.float16,) * 8, is_pure=True, pack=2)


@triton.jit
def _nibble_plane(packed, J: tl.constexpr):
    """fp16 (q - 8) of nibble J of every int32 in ``packed``: the interpreter's spelling."""
    codes = (packed >> (4 * J)) & 0xF
    return ((codes | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0).to(tl.float16)


@triton.jit
def _nibble_planes(packed, PTX: tl.constexpr):
    """The eight planes of ``packed``, nibble 0 first: fp16 (q - 8), a tuple of eight tensors."""
    if PTX:
        return _nibble_planes_ptx(packed)
    else:
        return (_nibble_plane(packed, 0), _nibble_plane(packed, 1), _nibble_plane(packed, 2),
                _nibble_plane(packed, 3), _nibble_plane(packed, 4), _nibble_plane(packed, 5),
                _nibble_plane(packed, 6), _nibble_plane(packed, 7))


@triton.jit
def _activation_planes(a_ptr, offs_m, mask_m, k, stride_am, stride_ak, BM: tl.constexpr,
                       BK: tl.constexpr):
    """A_j^T [BK/8, BM] for j = 0..7 from one contiguous [BM, BK] load (k = 8 k8 + j).

    Each thread loads 8 consecutive k (one 16-byte load), so splitting j = b0 + 2 b1 + 4 b2 off
    the last axis stays in registers.
    """
    offs_k = k + tl.arange(0, BK)
    a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                mask=mask_m[:, None], other=0.0)
    a = tl.reshape(a, [BM, BK // 8, 2, 2, 2])
    e, o = tl.split(a)  # b0 = 0, 1
    ee, eo = tl.split(e)  # b1
    oe, oo = tl.split(o)
    a0, a4 = tl.split(ee)  # b2
    a2, a6 = tl.split(eo)
    a1, a5 = tl.split(oe)
    a3, a7 = tl.split(oo)
    return (tl.trans(a0), tl.trans(a1), tl.trans(a2), tl.trans(a3),
            tl.trans(a4), tl.trans(a5), tl.trans(a6), tl.trans(a7))


@triton.jit
def swapab_kernel(
    # pointers
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr,
    # dimensions
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    # meta-parameters
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, PTX: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    # 1. program id -> (pid_n, pid_k, pid_m)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)

    # 2. pointers: the packed block [BN, BK/8] (W^T); the activations are loaded per block
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k8 = tl.arange(0, BK8)
    mask_m = offs_m < M
    mask_n = offs_n < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_begin // 8 + offs_k8)[None, :] * stride_bk

    # 3. the K loop: eight nibble-plane dots per block, then the block's scale in fp32
    acc = tl.zeros([BN, BM], dtype=tl.float32)
    for k in range(k_begin, k_end, BK):
        packed = tl.load(b_ptrs, mask=mask_n[:, None], other=0)
        a_planes = _activation_planes(a_ptr, offs_m, mask_m, k, stride_am, stride_ak, BM, BK)
        w_planes = _nibble_planes(packed, PTX)
        block = tl.zeros([BN, BM], dtype=tl.float32)
        for j in tl.static_range(8):
            block = tl.dot(w_planes[j], a_planes[j], block)
        s = tl.load(s_ptr + (k // GROUP) * stride_sg + offs_n * stride_sn, mask=mask_n, other=0.0)
        acc += block * s.to(tl.float32)[:, None]
        b_ptrs += BK8 * stride_bk

    # 4. store C = acc^T (or reduce the split-K partials in fp32, then store)
    tile_id = pid_m * tl.num_programs(0) + pid_n
    store_or_reduce_splitk(tl.trans(acc), c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n,
                           M, N, stride_cm, stride_cn, SPLIT_K)
