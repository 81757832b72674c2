"""GEMV for the smallest M: no tensor cores, broadcast-multiply and reduce, its own split-K.

At decode the layer is a memory stream and the H200 issues about as many instructions per byte
as it can move, so the inner loop is kept to about four SASS instructions per weight:

* nibble i of each 16-bit half of a packed int32 is put *in place* under the exponent
  2**(23 - 4i), whose unit in the last place is 16**-i: AND the nibble, OR the exponent, one LOP3
  (written in PTX: Triton's two constants became two LOP3), and the float is 2**(23 - 4i) + q
  exactly, with no int-to-float conversion (a slow instruction) and no rescaling;
* one FADD removes 2**(23 - 4i) + 8, leaving q - 8 exactly; one FFMA accumulates it against the
  activation in fp32;
* the activations are read as int32 pairs of fp16 (k, k + 1), both halves converted by PTX: half
  the loads of one fp16 each, and no PRMT to widen them. The launcher falls back to single loads
  when a's rows are not contiguous or its pairs not 4-byte aligned (A_PAIRS=False).
On the H200 these took the loop from 4.8 to 4.1 instructions per weight and M = 1 from 14.9 to
13.7 us on 4096x11008 (benchmarks/experiments/gemv_probe.py, NOTES.md row 19).

The accumulator keeps the [BM, BK/8, BN] shape of the loaded block and is reduced over K once,
after the loop; the per-group scale is applied per block, after the eight nibbles are summed.

Triton does not software-pipeline this loop (no ``tl.dot``), so the variant's ``num_stages`` is
implemented here: with STAGES = 2 the next packed block is loaded into registers before the
current one is unpacked, keeping a block per thread in flight while it computes.

The interpreter cannot run PTX: with PTX=False the same fields and conversions are spelled in
plain Triton.
"""
import triton
import triton.language as tl

from ._common import split_k_range, store_or_reduce_splitk


@triton.jit
def _exponent_fields_ptx(packed):
    # $8 is the int32; field i of half h = (x_h & (0xF << 4i)) | exponent(23 - 4i): one LOP3 each
    return tl.inline_asm_elementwise(
        asm="""{
        .reg .b32 hi;
        shr.u32 hi, $8, 16;
        lop3.b32 $0, $8, 0x000F, 0x4B000000, 0xEA;
        lop3.b32 $1, $8, 0x00F0, 0x49000000, 0xEA;
        lop3.b32 $2, $8, 0x0F00, 0x47000000, 0xEA;
        lop3.b32 $3, $8, 0xF000, 0x45000000, 0xEA;
        lop3.b32 $4, hi, 0x000F, 0x4B000000, 0xEA;
        lop3.b32 $5, hi, 0x00F0, 0x49000000, 0xEA;
        lop3.b32 $6, hi, 0x0F00, 0x47000000, 0xEA;
        lop3.b32 $7, hi, 0xF000, 0x45000000, 0xEA;
        }""",
        constraints="=r,=r,=r,=r,=r,=r,=r,=r,r", args=[packed],
        dtype=(tl.float32,) * 8, is_pure=True, pack=1)


@triton.jit
def _exponent_field(packed, J: tl.constexpr):
    """2**(23 - 4i) + q_J as fp32 (i = J % 4): the interpreter's spelling."""
    src = (packed >> (16 * (J // 4))) & 0xFFFF
    return ((src & (0xF << (4 * (J % 4)))) | ((150 - 4 * (J % 4)) << 23)).to(tl.float32, bitcast=True)


@triton.jit
def _exponent_fields(packed, PTX: tl.constexpr):
    if PTX:
        return _exponent_fields_ptx(packed)
    else:
        return (_exponent_field(packed, 0), _exponent_field(packed, 1), _exponent_field(packed, 2),
                _exponent_field(packed, 3), _exponent_field(packed, 4), _exponent_field(packed, 5),
                _exponent_field(packed, 6), _exponent_field(packed, 7))


@triton.jit
def _fp16_pair_to_f32(pair, PTX: tl.constexpr):
    """(low, high) fp16 halves of an int32 as two fp32."""
    if PTX:
        return tl.inline_asm_elementwise(
            asm="{ .reg .b16 l, h; mov.b32 {l, h}, $2; cvt.f32.f16 $0, l; cvt.f32.f16 $1, h; }",
            constraints="=r,=r,r", args=[pair], dtype=(tl.float32, tl.float32), is_pure=True, pack=1)
    else:
        lo = (pair & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        hi = ((pair >> 16) & 0xFFFF).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        return lo, hi


@triton.jit
def gemv_kernel(
    # pointers
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr,
    # dimensions
    M, N, K,
    # strides
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    # meta-parameters
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, STAGES: tl.constexpr, A_PAIRS: tl.constexpr, PTX: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    # 1. program id -> (pid_n, pid_k, pid_m)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)

    # 2. pointers, all 3-D [BM, BK/8, BN] from the start: the packed block, the activations
    #    and the accumulator then share one register layout. (Built 2-D and broadcast, each
    #    nibble's block took a shared-memory layout conversion: 134 barriers per loop.)
    #    K % BK == 0 is guaranteed by the variant space.
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    m3 = offs_m[:, None, None]
    k3 = tl.arange(0, BK8)[None, :, None]
    n3 = offs_n[None, None, :]
    mask_m3 = m3 < M
    mask_n3 = n3 < N
    k_begin, k_end = split_k_range(pid_k, K, BK, SPLIT_K)
    b_ptrs = b_ptr + (k_begin // 8 + k3) * stride_bk + n3 * stride_bn  # [1, BK8, BN]
    a_ptrs = a_ptr + m3 * stride_am + (k_begin + k3 * 8) * stride_ak  # [BM, BK8, 1]

    # 3. the K loop
    acc = tl.zeros([BM, BK8, BN], dtype=tl.float32)
    if STAGES > 1:
        ahead = tl.load(b_ptrs, mask=mask_n3 & (k_begin < k_end), other=0)
    for k in range(k_begin, k_end, BK):
        if STAGES > 1:
            packed = ahead
            ahead = tl.load(b_ptrs + BK8 * stride_bk, mask=mask_n3 & (k + BK < k_end), other=0)
        else:
            packed = tl.load(b_ptrs, mask=mask_n3, other=0)
        fields = _exponent_fields(packed, PTX)
        block = tl.zeros([BM, BK8, BN], dtype=tl.float32)
        for p in tl.static_range(4):  # activations k = 8 k8 + 2p, 2p + 1
            if A_PAIRS:
                pair = tl.load(a_ptrs.to(tl.pointer_type(tl.int32), bitcast=True) + p, mask=mask_m3, other=0)
                a_even, a_odd = _fp16_pair_to_f32(pair, PTX)
            else:
                a_even = tl.load(a_ptrs + (2 * p) * stride_ak, mask=mask_m3, other=0.0).to(tl.float32)
                a_odd = tl.load(a_ptrs + (2 * p + 1) * stride_ak, mask=mask_m3, other=0.0).to(tl.float32)
            # field j is 2**(23 - 4 (j % 4)) + q exactly; subtracting that and 8 leaves q - 8
            block += a_even * (fields[2 * p] - ((1 << (23 - 4 * ((2 * p) % 4))) + 8.0))
            block += a_odd * (fields[2 * p + 1] - ((1 << (23 - 4 * ((2 * p + 1) % 4))) + 8.0))
        if BK <= GROUP:  # one scale row for the whole block
            s = tl.load(s_ptr + (k // GROUP) * stride_sg + n3 * stride_sn, mask=mask_n3, other=0.0)
        else:
            s = tl.load(s_ptr + ((k + k3 * 8) // GROUP) * stride_sg + n3 * stride_sn,
                        mask=mask_n3, other=0.0)
        acc += block * s.to(tl.float32)
        a_ptrs += BK * stride_ak
        b_ptrs += BK8 * stride_bk

    # 4. reduce over K, then store (or reduce the split-K partials in fp32, then store)
    out = tl.sum(acc, axis=1)
    tile_id = pid_m * tl.num_programs(0) + pid_n
    store_or_reduce_splitk(out, c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n, M, N,
                           stride_cm, stride_cn, SPLIT_K)


def a_pairs_ok(a) -> bool:
    """Whether the activations can be read as int32 pairs: rows contiguous, pairs 4-byte aligned."""
    return a.stride(1) == 1 and a.stride(0) % 2 == 0 and a.data_ptr() % 4 == 0
