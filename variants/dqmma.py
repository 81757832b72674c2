"""The dqmma family: a W4A16 tensor-core GEMM written in Gluon, for M = 64..192 on Hopper.

Triton's `tl.dot` waits for every wgmma before the threads unpack the next block of weights
(NOTES.md rows 15, 18, 35). Gluon (`triton.experimental.gluon`) exposes shared memory, cp.async
groups and `warpgroup_mma` with a chosen wait depth, so the schedule is written down:

    block i:  wait for the copies of A_i and packed W_i -> unpack W_i (shared -> registers) -> store
              to W buffer i % 3 -> fence, barrier -> wgmma(A_i, W_i) issued async -> wait until
              <= 1 wgmma in flight -> copy A and packed W of block i+STAGES-2 into block i-2's slots

so the unpack of block i+1 runs while the tensor cores multiply block i. Buffers are reused two
blocks later, after every warp has passed a barrier that follows its own wait for that block's MMA,
so one barrier per block suffices for any number of warp groups.

Tile: acc [BM, BN] = A [BM, BK] x W [BK, BN], BM = 16 x num_warps (64: one warp group, 128: two),
BN = 64..256 (the wgmma N); BK = 64 or 128 (divides the group size: one scale row per block, folded
into the fp16 weights, which is exactly dequantize's fp16 product). Split-K over whole BK blocks with
the Triton families' deterministic reduction (fp32 partials, the last split sums them in order).
The column strides of A, packed and scales must be 1 and A's rows 16-byte aligned (the launcher
passes an aligned copy otherwise); C may have any strides.
Not searched, kept for benchmarks/experiments/gluon_dqmma.py: SWAP (acc^T [BN, BM] = W^T A^T from
transposed views of the same buffers, tokens as the wgmma N; slower at every key timed), PTX=False
(the unpack in plain Gluon ops) and PARTS (timing anatomy: 1 the unpack without the MMA, 2 the MMA
without the unpack; wrong results).

Measured on the H200 (NOTES.md rows 39-41): 0.80-0.82x the Triton families' time at M=128 on the
N >= 11008 llama-7b shapes (bm128.bn128, one split, 8 stages), slower at M <= 64 and on N = 4096.
Gluon has no CPU interpreter: the family is offered only on an sm_90 GPU (`space.DeviceLimits`);
CI compiles it for sm_90 and checks its schedule in the SASS, the GPU tests check its results.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, warpgroup_mma, warpgroup_mma_wait

W_BUFFERS = gl.constexpr(3)  # a W buffer is rewritten two blocks after its MMA was issued (see the module docstring)


@gluon.constexpr_function
def _threads_along(n_vectors):
    """Threads of a warp along a dimension holding ``n_vectors`` vectors (the rest go along the other)."""
    return min(32, n_vectors)


@gluon.jit
def _nibbles_ptx(packed):
    """The eight nibble planes of ``packed`` as fp16 q - 8, two neighbouring words per PTX block.

    The same PTX as swapab's ``_nibble_planes_ptx`` (copied: a Gluon function cannot call a
    ``triton.jit`` one, and moving the text out of swapab.py would change the Triton families' kernel
    hash, which every stored trial of theirs is keyed by). Words n and n+1 of one row give plane j's
    fp16 pair (n, n+1), the pair the register layout holds side by side along n.
    """
    return gl.inline_asm_elementwise(
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
        dtype=(gl.float16,) * 8, is_pure=True, pack=2)


@gluon.jit
def _unpack_scaled_ptx(packed, s):
    """As ``_unpack_scaled``, the planes from ``_nibbles_ptx`` joined into k order (j = j0 + 2 j1 + 4 j2)."""
    q = _nibbles_ptx(packed)
    s2 = gl.expand_dims(s, 0)
    w = gl.join(gl.join(gl.join(q[0] * s2, q[1] * s2), gl.join(q[2] * s2, q[3] * s2)),
                gl.join(gl.join(q[4] * s2, q[5] * s2), gl.join(q[6] * s2, q[7] * s2)))  # [BK8, BN, j0, j1, j2]
    w = gl.permute(w, [0, 4, 3, 2, 1])  # [BK8, j2, j1, j0, BN]
    return gl.reshape(w, [w.shape[0] * 8, w.shape[4]])


@gluon.jit
def _unpack_scaled(packed, s, L3: gl.constexpr):
    """fp16 (q - 8) * s of a packed block [BK/8, BN] -> [BK, BN] in k order (row 8 k8 + j is nibble j)."""
    j = gl.arange(0, 8, layout=gl.SliceLayout(0, gl.SliceLayout(2, L3)))
    shifts = gl.expand_dims(gl.expand_dims(j * 4, 0), 2)  # [1, 8, 1]
    codes = (gl.expand_dims(packed, 1) >> shifts) & 0xF  # mask after the shift: nibble 7 holds the sign bit
    # 0x6400 | q is the fp16 1024 + q: an exact conversion without I2F; minus 1032 leaves q - 8
    w = (codes | 0x6400).to(gl.int16).to(gl.float16, bitcast=True) - 1032.0
    w = w * gl.expand_dims(gl.expand_dims(s, 0), 0)
    return gl.reshape(w, [w.shape[0] * 8, w.shape[2]])


@gluon.jit
def dqmma_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sg, stride_sn, stride_cm, stride_cn,
    GROUP: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, SPLIT_K: gl.constexpr,
    STAGES: gl.constexpr, PTX: gl.constexpr, SWAP: gl.constexpr, num_warps: gl.constexpr,
    PARTS: gl.constexpr = 3,
):
    BK8: gl.constexpr = BK // 8
    # the wgmma M (16 rows per warp) is the tokens, or with SWAP the weights' columns
    gl.static_assert((BN if SWAP else BM) == 16 * num_warps, "16 rows of the wgmma M per warp")
    gl.static_assert(BM % 8 == 0 and BM <= 256, "BM is a wgmma N with SWAP: a multiple of 8")
    gl.static_assert(GROUP % BK == 0, "a block lies in one scale group")
    gl.static_assert(STAGES >= 3, "the A slot refilled in block i is block i-2's")
    pid_n = gl.program_id(0)
    pid_k = gl.program_id(1)
    pid_m = gl.program_id(2)

    # layouts: A copied 16 bytes per thread along k; packed W 16 bytes per thread along n, all eight
    # nibbles of a word in the thread that loaded it; the accumulator in wgmma's layout
    TK: gl.constexpr = _threads_along(BK // 8)
    LA: gl.constexpr = gl.BlockedLayout([1, 8], [32 // TK, TK], [num_warps, 1], [1, 0])
    TN: gl.constexpr = _threads_along(BN // 4)
    L3: gl.constexpr = gl.BlockedLayout([1, 8, 4], [32 // TN, 1, TN], [num_warps, 1, 1], [2, 1, 0])
    LP: gl.constexpr = gl.SliceLayout(1, L3)  # the packed block [BK/8, BN]
    LS: gl.constexpr = gl.SliceLayout(0, gl.SliceLayout(0, L3))  # the scales [BN]
    ACC: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                  instr_shape=[16, BM if SWAP else BN, 16])
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BM, BK],
                                       gl.NVMMASharedLayout.get_default_for([BM, BK], gl.float16))
    # the packed blocks are copied and read back in the same layout, so each thread reads only the
    # words it copied itself: no barrier between its wait for the copy and its read
    p_smem = gl.allocate_shared_memory(gl.int32, [STAGES, BK8, BN],
                                       gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    w_smem = gl.allocate_shared_memory(gl.float16, [W_BUFFERS, BK, BN],
                                       gl.NVMMASharedLayout.get_default_for([BK, BN], gl.float16))

    # this split's blocks: whole BK blocks, the last split possibly shorter or empty
    blocks_per_split = (K // BK + SPLIT_K - 1) // SPLIT_K
    first_block = pid_k * blocks_per_split
    n_blocks = gl.maximum(gl.minimum(K // BK - first_block, blocks_per_split), 0)
    k_begin = first_block * BK

    offs_am = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, LA))
    offs_ak = gl.arange(0, BK, layout=gl.SliceLayout(0, LA))
    a_ptrs = a_ptr + gl.expand_dims(offs_am, 1) * stride_am + gl.expand_dims(k_begin + offs_ak, 0)
    a_rows = gl.expand_dims(offs_am < M, 1)
    offs_pk = gl.arange(0, BK8, layout=gl.SliceLayout(1, LP))
    offs_pn = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, LP))
    b_ptrs = b_ptr + gl.expand_dims(k_begin // 8 + offs_pk, 1) * stride_bk + gl.expand_dims(offs_pn, 0)
    b_cols = gl.expand_dims(offs_pn < N, 0)
    offs_sn = pid_n * BN + gl.arange(0, BN, layout=LS)
    s_cols = offs_sn < N

    # prologue: blocks 0 .. STAGES-3 (A and packed W) in flight, block 0's scales in registers
    for p in gl.static_range(STAGES - 2):
        async_copy.async_copy_global_to_shared(a_smem.index(p), a_ptrs + p * BK, mask=a_rows & (p < n_blocks))
        async_copy.async_copy_global_to_shared(p_smem.index(p), b_ptrs + p * BK8 * stride_bk,
                                               mask=b_cols & (p < n_blocks))
        async_copy.commit_group()
    s = gl.load(s_ptr + (k_begin // GROUP) * stride_sg + offs_sn, mask=s_cols & (n_blocks > 0), other=0.0)

    acc = gl.full([BN, BM] if SWAP else [BM, BN], 0.0, gl.float32, layout=ACC)
    for i in range(n_blocks):
        # the next block's scales: in flight while this block is unpacked and multiplied
        k_next = k_begin + (i + 1) * BK
        s_next = gl.load(s_ptr + (k_next // GROUP) * stride_sg + offs_sn, mask=s_cols & (i + 1 < n_blocks),
                         other=0.0)
        async_copy.wait_group(STAGES - 3)  # this thread's copies of block i have landed
        w_buf = w_smem.index(i % W_BUFFERS)
        if PARTS & 1:  # (timing anatomy only: without it the MMA reads whatever the buffer holds)
            packed = p_smem.index(i % STAGES).load(LP)
            if PTX:
                w_buf.store(_unpack_scaled_ptx(packed, gl.convert_layout(s, gl.SliceLayout(0, LP))))
            else:
                w_buf.store(_unpack_scaled(packed, s, L3))
        fence_async_shared()  # the stores and copies above, visible to the tensor cores' proxy
        gl.thread_barrier()  # ... from every thread
        if PARTS & 2:  # (timing anatomy only: without it C stays 0)
            if SWAP:  # C^T [BN, BM] = W^T [BN, BK] x A^T [BK, BM]: transposed views of the same buffers
                acc = warpgroup_mma(w_buf.permute((1, 0)), a_smem.index(i % STAGES).permute((1, 0)), acc,
                                    is_async=True)
            else:
                acc = warpgroup_mma(a_smem.index(i % STAGES), w_buf, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))  # block i-1's MMA is done

        # refill the slots of block i-2: every warp waited for its MMA and read its packed words
        # before this block's barrier
        refill = i + STAGES - 2
        async_copy.async_copy_global_to_shared(a_smem.index(refill % STAGES), a_ptrs + refill * BK,
                                               mask=a_rows & (refill < n_blocks))
        async_copy.async_copy_global_to_shared(p_smem.index(refill % STAGES), b_ptrs + refill * BK8 * stride_bk,
                                               mask=b_cols & (refill < n_blocks))
        async_copy.commit_group()
        s = s_next
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
    async_copy.wait_group(0)

    # epilogue: fp16 C tile, or the deterministic split-K reduction of the shipped kernels
    # (with SWAP the accumulator's rows are C's columns)
    offs_cm = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(0 if SWAP else 1, ACC))
    offs_cn = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(1 if SWAP else 0, ACC))
    cm = gl.expand_dims(offs_cm, 0 if SWAP else 1)
    cn = gl.expand_dims(offs_cn, 1 if SWAP else 0)
    mask = (cm < M) & (cn < N)
    c_ptrs = c_ptr + cm * stride_cm + cn * stride_cn
    if SPLIT_K == 1:
        gl.store(c_ptrs, acc.to(gl.float16), mask=mask)
    else:
        ws_ptrs = ws_ptr + cm * N + cn
        gl.store(ws_ptrs + pid_k * M * N, acc, mask=mask)
        gl.thread_barrier()  # every thread's partial is written before the release below
        tile_id = pid_m * gl.num_programs(0) + pid_n
        arrived = gl.atomic_add(lock_ptr + tile_id, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            total = gl.full([BN, BM] if SWAP else [BM, BN], 0.0, gl.float32, layout=ACC)
            for part in range(SPLIT_K):
                total += gl.load(ws_ptrs + part * M * N, mask=mask, other=0.0, cache_modifier=".cg")
            gl.store(c_ptrs, total.to(gl.float16), mask=mask)
            gl.atomic_xchg(lock_ptr + tile_id, 0, sem="relaxed")
