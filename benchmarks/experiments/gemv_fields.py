"""EXPERIMENT (not shipped yet): the gemv with fewer instructions per weight.

The shipped gemv (variants/gemv.py) spends ~4.8 SASS instructions per weight in its loop (row 3 of
NOTES.md), and at M = 1 the H200 issues 0.66 instructions per scheduler-cycle: the loop is close to
issue-bound. Two changes, each counted in SASS for sm_90 (benchmarks/sass_stats.py's helper):

* FIELDS: nibble i of each 16-bit half goes under its own exponent 2**(23 - 4i), whose unit in the
  last place is 16**-i, so the float is 2**(23 - 4i) + q exactly and the activation needs no 16**-i
  rescaling (the shipped kernel's FMUL per activation). AND-then-OR with two constants is one LOP3
  only when written in PTX (Triton's two ops became two LOP3), so the eight fields of one int32 come
  from one PTX block: one SHR and eight LOP3. Loop: 4.77 -> 4.45 instructions per weight (BN 1024).
* A_PAIRS: the activations are read as int32 pairs of fp16 (k, k + 1) and both halves converted by
  PTX: half the loads and no PRMT to zero-extend a 16-bit load. Needs a's rows contiguous and its
  pointer 4-byte aligned (the launcher checks).

Same arguments and grid as the shipped gemv_kernel, plus the FIELDS/A_PAIRS/PTX flags (the
interpreter cannot run PTX, so PTX=False takes a plain-Triton spelling of both).
"""
import triton
import triton.language as tl

from tunesearch.variants._common import split_k_range, store_or_reduce_splitk


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
def gemv_fields_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
    SPLIT_K: tl.constexpr, STAGES: tl.constexpr, A_PAIRS: tl.constexpr, PTX: tl.constexpr,
):
    BK8: tl.constexpr = BK // 8
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_m = tl.program_id(2)

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
        if BK <= GROUP:
            s = tl.load(s_ptr + (k // GROUP) * stride_sg + n3 * stride_sn, mask=mask_n3, other=0.0)
        else:
            s = tl.load(s_ptr + ((k + k3 * 8) // GROUP) * stride_sg + n3 * stride_sn,
                        mask=mask_n3, other=0.0)
        acc += block * s.to(tl.float32)
        a_ptrs += BK * stride_ak
        b_ptrs += BK8 * stride_bk

    out = tl.sum(acc, axis=1)
    tile_id = pid_m * tl.num_programs(0) + pid_n
    store_or_reduce_splitk(out, c_ptr, ws_ptr, lock_ptr, tile_id, pid_k, offs_m, offs_n, M, N,
                           stride_cm, stride_cn, SPLIT_K)


def a_pairs_ok(a) -> bool:
    """Whether the activations can be read as int32 pairs: rows contiguous, pairs 4-byte aligned."""
    return a.stride(1) == 1 and a.stride(0) % 2 == 0 and a.data_ptr() % 4 == 0
