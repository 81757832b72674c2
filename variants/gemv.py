"""GEMV for the smallest M: no tensor cores, broadcast-multiply and reduce, its own split-K.

At decode the layer is a memory stream and the H200 issues about as many instructions per byte
as it can move, so the inner loop is kept to three instructions per weight:

* nibble j of a packed int32 is isolated *in place* under the exponent of 2**23 (each 16-bit
  half of the int32 is OR-ed with 0x4B000000 once, then one AND per weight keeps the exponent
  and nibble j), which bitcasts to the float ``2**23 + q * 16**j`` without an int-to-float
  conversion (a slow instruction);
* one FADD removes ``2**23 + 8 * 16**j``, leaving ``(q - 8) * 16**j`` exactly;
* one FFMA accumulates it against the activation pre-multiplied by ``16**-j`` (exact: a power
  of two), so the ``16**j`` cancels.

The accumulator keeps the [BM, BK/8, BN] shape of the loaded block and is reduced over K once,
after the loop; the per-group scale is applied per block, after the eight nibbles are summed.

Triton does not software-pipeline this loop (no ``tl.dot``), so the variant's ``num_stages`` is
implemented here: with STAGES = 2 the next packed block is loaded into registers before the
current one is unpacked, keeping a block per thread in flight while it computes.
"""
import triton
import triton.language as tl

from ._common import split_k_range, store_or_reduce_splitk


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
    SPLIT_K: tl.constexpr, STAGES: tl.constexpr,
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
        # per int32: nibbles 0..3 and 4..7 each under the exponent of 2**23 (two ops per half),
        # so that per weight a single AND (one immediate: one LOP3) isolates the field
        base_lo = (packed & 0xFFFF) | 0x4B000000
        base_hi = ((packed >> 16) & 0xFFFF) | 0x4B000000
        block = tl.zeros([BM, BK8, BN], dtype=tl.float32)
        for j in tl.static_range(8):
            if j < 4:
                src = base_lo
            else:
                src = base_hi
            # (a constexpr cannot be re-bound inside static_range, so the shift is spelled out)
            field = src & (0x4B000000 | (0xF << (4 * (j % 4))))  # 2**23 + q * 16**(j%4) as bits
            w = field.to(tl.float32, bitcast=True) - (8388608.0 + 8.0 * (1 << (4 * (j % 4))))
            a_j = tl.load(a_ptrs + j * stride_ak, mask=mask_m3, other=0.0)
            a_j = a_j.to(tl.float32) * (1.0 / (1 << (4 * (j % 4))))
            block += a_j * w
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
