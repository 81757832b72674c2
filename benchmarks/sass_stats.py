"""SASS instruction counts of the kernels, compiled for sm_90 on a machine without a GPU.

    python benchmarks/sass_stats.py
Triton compiles for GPUTarget("cuda", 90, 32) without a device and ships ptxas and cuobjdump, so the
loop's instruction mix (conversions, shared-memory stores, barriers, loads per weight) can be read
before spending device time. Integer arguments are marked divisible by 16, as the real launch
specializes them for llama shapes.
"""
import collections
import os
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tunesearch.variants.gemm import gemm_kernel
from tunesearch.variants.gemv import gemv_kernel
from tunesearch.variants.swapab import swapab_kernel

ARGS = ["a_ptr", "b_ptr", "s_ptr", "c_ptr", "ws_ptr", "lock_ptr", "M", "N", "K", "stride_am", "stride_ak",
        "stride_bk", "stride_bn", "stride_sg", "stride_sn", "stride_cm", "stride_cn"]
TYPES = ["*fp16", "*i32", "*fp16", "*fp16", "*fp32", "*i32"] + ["i32"] * 11
UNIT_STRIDES = dict(stride_ak=1, stride_bn=1, stride_sn=1, stride_cn=1)
# pointers, N, K and the row strides, stride_am included: at llama shapes it is K, a multiple of 16,
# and Triton specializes it; without it the activations' rows look unaligned and no load of A vectorizes.
DIVISIBLE = (0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 13, 15)


def compile_sm90(kernel, constexprs: dict, num_warps: int, num_stages: int):
    consts = {**UNIT_STRIDES, **constexprs}
    signature = {name: ("constexpr" if name in consts else t) for name, t in zip(ARGS, TYPES)}
    signature.update({name: "constexpr" for name in consts})
    src = ASTSource(kernel, signature, constexprs=consts,
                    attrs={(i,): [["tt.divisibility", 16]] for i in DIVISIBLE})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options=dict(num_warps=num_warps, num_stages=num_stages))


def _cuobjdump(compiled, flag: str) -> str:
    """``cuobjdump FLAG`` on the kernel's cubin (Triton ships the tool)."""
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        return subprocess.run([cuobjdump, flag, f.name], capture_output=True, text=True).stdout


def disassemble(compiled) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of every SASS instruction, predicates stripped."""
    out = []
    for line in _cuobjdump(compiled, "-sass").splitlines():
        hit = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s*(@!?U?P\w+\s+)?([A-Z0-9_.]+)(.*)", line)
        if hit:
            out.append((int(hit.group(1), 16), hit.group(3), hit.group(4)))
    return out


def resources(compiled) -> dict:
    """Registers per thread and thread-local memory bytes, from the cubin (no GPU needed). ``local`` is
    the kernel's LOCAL plus its STACK: ptxas puts register spills in the stack frame (e.g. 456 bytes,
    93 LDL, at LOCAL:0 for rsmma bm256.bn128.bk64.sk2.w8), and these kernels make no calls that would
    need one, so any of either is a spill."""
    usage = _cuobjdump(compiled, "-res-usage")
    got = {key: int(re.search(rf"{key}:(\d+)", usage).group(1)) for key in ("REG", "LOCAL", "STACK")}
    return dict(reg=got["REG"], local=got["LOCAL"] + got["STACK"])


def staged_epilogue_loads(instrs) -> int:
    """rsmma's one-split epilogue reading C's staged tile back from shared memory, 16 bytes a load (its
    loop has no shared load that wide, NOTES.md row 80): counted apart from the loop's shared loads."""
    return sum(op == "LDS.128" for _, op, _ in instrs)


def _first_async_copy(instrs) -> int:
    """Where the kernel's first async copy (LDGSTS) is: rsmma's split reduction's read-back of the
    partials through the drained ring (STAGED_SPLIT, NOTES.md row 84); the K loop's copies are TMA."""
    return next((i for i, (_, op, _) in enumerate(instrs) if op.startswith("LDGSTS")), len(instrs))


def _copy_fence(op: str, rest: str) -> bool:
    """``LDS RZ, [RZ]``, which ptxas puts before each batch of async copies: it loads nothing."""
    return op == "LDS" and rest.strip().startswith("RZ, [RZ]")


def before_split_readback(instrs) -> list:
    """``instrs`` without rsmma's split reduction's read-back (from its first async copy on) and without
    the copies' fences: what the K loop and the rest of the kernel load, for counts that the read-back
    would blur."""
    return [(a, op, rest) for a, op, rest in instrs[:_first_async_copy(instrs)] if not _copy_fence(op, rest)]


def split_readback_loads(instrs) -> int:
    """The shared loads of rsmma's split reduction's read-back of the partials (STAGED_SPLIT): those
    from its first async copy on, less the staged C tile's 16-byte ones, and the copies' fences."""
    first = _first_async_copy(instrs)
    after = sum(op.startswith("LDS") and op != "LDS.128" for _, op, _ in instrs[first:])
    return after + sum(_copy_fence(op, rest) for _, op, rest in instrs[:first])


def wgmma_waits(instrs) -> list[str]:
    """The operands of each wgmma wait (WARPGROUP.DEPBAR) in ``instrs``, in order: "gsb0, 0x1" leaves one
    wgmma in flight, "gsb0, 0x0" waits for all."""
    return [rest.split(";")[0].strip() for _, op, rest in instrs if op.startswith("WARPGROUP.DEPBAR")]


def loop_body(compiled, containing: str | None = None) -> list[tuple[int, str, str]]:
    """The hottest loop's instructions: the longest backward branch's body (the K loop, unpeeled),
    or the longest one holding an opcode starting with ``containing`` (a split-K epilogue's loop can
    be longer than a short K loop)."""
    instrs = disassemble(compiled)
    best = (0, 0)
    for addr, op, rest in instrs:
        target = re.search(r"BRA\s+(?:`\(.*?\)\s*)?0x([0-9a-f]+)", op + rest)
        if op.startswith("BRA") and target and int(target.group(1), 16) < addr:
            start = int(target.group(1), 16)
            holds = containing is None or any(start <= a <= addr and o.startswith(containing) for a, o, _ in instrs)
            if holds and addr - start > best[1] - best[0]:
                best = (start, addr)
    return [(a, op, rest) for a, op, rest in instrs if best[0] <= a <= best[1]]


def loop_counts(compiled) -> collections.Counter:
    """Opcodes of the hottest loop (``loop_body``), counted by their first name part."""
    return collections.Counter(op.split(".")[0] for _, op, _ in loop_body(compiled))


def main():
    show = ("LOP3", "PRMT", "SHF", "FADD", "FFMA", "LDG", "LDGSTS", "STS", "LDS", "BAR", "I2F", "HADD2",
            "HMUL2", "IMAD", "HGMMA", "HMMA")
    cases = [("gemv", gemv_kernel, dict(GROUP=128, BM=1, BN=1024, BK=32, SPLIT_K=32, STAGES=2), 8, 1),
             ("gemv", gemv_kernel, dict(GROUP=128, BM=4, BN=64, BK=64, SPLIT_K=8, STAGES=1), 4, 1),
             ("swapab", swapab_kernel, dict(GROUP=128, BM=16, BN=128, BK=128, SPLIT_K=4, PTX=True), 4, 3),
             ("swapab", swapab_kernel, dict(GROUP=128, BM=16, BN=64, BK=128, SPLIT_K=8, PTX=True), 2, 3),
             ("gemm", gemm_kernel, dict(GROUP=128, BM=64, BN=128, BK=64, GROUP_M=8, SPLIT_K=1), 4, 3),
             ("gemm", gemm_kernel, dict(GROUP=128, BM=16, BN=64, BK=128, GROUP_M=1, SPLIT_K=4), 4, 3)]
    print("SASS instructions of the K loop's body per weight a thread handles in one iteration")
    for name, kernel, meta, warps, stages in cases:
        counts = loop_counts(compile_sm90(kernel, meta, warps, stages))
        per = meta["BN"] * meta["BK"] / (32 * warps)  # weights per thread per iteration
        detail = " ".join(f"{op}={counts[op] / per:.2f}" for op in show if counts[op])
        print(f"{name} {meta} w{warps} s{stages}: loop {sum(counts.values()) / per:.2f} | {detail}")


if __name__ == "__main__":
    main()
