"""EXPERIMENT (NOTES.md row 74): programmatic dependent launch (PDL) for rsmma, on the GPU.

    git apply benchmarks/experiments/pdl.patch   (rsmma's PDL: not in rsmma.py as shipped)
    python benchmarks/experiments/pdl_ab.py OUT_DIR [M,...]   (on an sm_90 GPU)

Launched with PDL (CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION), a kernel may start before the one
before it in the stream has ended: its CTAs take SMs as the earlier grid's leave, and `griddepcontrol.wait`
holds each until the earlier grid has ended and its writes are visible. rsmma's CTAs signal
`launch_dependents` at their start; its loader waits before the first copy of A (PDL=1), or first copies
the weights of its ring's first STAGES blocks, which nothing in the stream writes, and waits only before
A's (PDL=2). Every write (C, the split's workspace and counters) comes after the wait. What it can take out:
the launch gap between kernels and, where the next kernel is also PDL-launched, the tail of this one (the
split-K reduction, the last CTAs) under the next one's first loads.

For each llama-7b shape and M (default 1, 4, 16, 32, 64) whose packaged-table pick is rsmma:
  - checks: each form against A @ dequantize(W); the PDL=2 form in a replayed graph where a copy kernel
    writes A just before each launch (a read of A before the wait would see the old A);
  - times, with the sweep's harness (CUDA-graph replay over rotated copies > 3x L2, median of 20
    replays), alternating twice, best of two: `off` (PDL=0, plain launch: the shipped kernel's form),
    `wait` (PDL=1) and `prefetch` (PDL=2), both PDL-launched, back to back;
  - the same three after a non-PDL kernel (`pair_*`: an fp16 copy of A's size, then the GEMM, per copy):
    what a GEMM gains in a model where the kernel before it does not signal;
  - the streaming-read floor for the same bytes plain (tunesearch.gpu's) and PDL-launched (reads before
    its wait, the store after), the reachable floor with and without the overlap.
Writes OUT_DIR/pdl_ab.json and prints a table. Measured (`pdl_ab_h200_2026-12-01_s34.*`, NOTES.md row 74):
right everywhere; back to back faster at 15 of 20 keys (M=1 4096x11008 11.11 -> 9.70 us) and slower at 5
(M=1 11008x4096 10.99 -> 12.37); after a non-PDL kernel PDL=1 level and PDL=2 1.4-7.5% slower at every key;
the floor 1.9-3.0 us faster PDL-launched. Not shipped: in a model the kernel before a GEMM does not signal.
"""
import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from benchmarks.experiments.dqmma_rs import family_launch  # noqa: E402

FORMS = {"off": dict(PDL=0), "wait": dict(PDL=1, launch_pdl=True), "prefetch": dict(PDL=2, launch_pdl=True)}


@triton.jit
def _stream_read_pdl_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """tunesearch.gpu's floor kernel with PDL: its reads may run before the grid before it ends."""
    gdc_launch_dependents()
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + offs, mask=offs < n, other=0)
    gdc_wait()
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


def hazard_error(variant, check, meta) -> float:
    """The relative error of the GEMM reading an A that a copy kernel writes just before it, both replayed
    in one graph (a zeroed buffer before the graph: an A read before the wait is zeros or stale)."""
    from tunesearch.bench import relative_error

    a_buf = torch.zeros_like(check.a)
    out = torch.full_like(check.out, float("nan"))
    launch = family_launch(variant, **meta)(a_buf, check.packed, check.scales, out)
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        launch()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        a_buf.copy_(check.a)
        launch()
    worst = 0.0
    for _ in range(5):
        a_buf.zero_()
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        worst = max(worst, relative_error(out, check.ref))
    return worst


def main(out_dir, ms=(1, 4, 16, 32, 64)):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, kernel_bytes, time_fp16
    from tunesearch.gpu import gpu_info, stream_read_floor

    info = gpu_info(0)
    rows = []
    for M, K, N, layout, pick in gluon_checks.packaged_picks(ms, "rsmma"):
        ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
        check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
        row = dict(M=M, K=K, N=N, variant=pick.id)
        ok = {}
        for name, meta in FORMS.items():
            err = gluon_checks.relative_error_of(family_launch(pick, **meta), check)
            row[name + "_rel_error"] = err
            ok[name] = err < REL_TOL
        row["hazard_rel_error"] = hazard_error(pick, check, FORMS["prefetch"])
        ok["prefetch"] &= row["hazard_rel_error"] < REL_TOL
        a_src = [torch.randn_like(c[0]) for c in ops.copies]
        for _ in range(2):  # two rounds, alternating the forms
            for name, meta in FORMS.items():
                if not ok[name]:
                    row[name] = row["pair_" + name] = "WRONG"
                    continue
                launches = [family_launch(pick, **meta)(*c) for c in ops.copies]
                row.setdefault(name, []).append(graph_time(launches, replays=20).us)
                pairs = []
                for c, src, go in zip(ops.copies, a_src, launches):
                    pairs += [lambda c=c, src=src: c[0].copy_(src), go]
                row.setdefault("pair_" + name, []).append(graph_time(pairs, replays=20).us * 2)
        nbytes = kernel_bytes(M, N, K, 128)
        row["floor"] = stream_read_floor(nbytes, info.l2_bytes, info.sm_count, 20).us
        row["floor_pdl"] = stream_read_floor(nbytes, info.l2_bytes, info.sm_count, 20,
                                             kernel=_stream_read_pdl_kernel, launch_pdl=True).us
        row["fp16"] = time_fp16(M, N, K, info.l2_bytes, 20).us
        rows.append(row)
        print(json.dumps({k: (min(v) if isinstance(v, list) else v) for k, v in row.items()}), flush=True)
        del ops, check
        with open(f"{out_dir}/pdl_ab.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)
    best = lambda r, n: min(r[n]) if isinstance(r.get(n), list) else None  # noqa: E731
    f = lambda x: f"{x:7.2f}" if x else "      -"  # noqa: E731
    print(f"{'key':>17} {'variant':>36} {'off':>7} {'wait':>7} {'prefch':>7} | {'p_off':>7} {'p_wait':>7} "
          f"{'p_pref':>7} | {'floor':>7} {'fl_pdl':>7} {'fp16':>7}")
    for r in rows:
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>17} {r['variant']:>36} "
              + " ".join(f(best(r, n)) for n in FORMS) + " | "
              + " ".join(f(best(r, "pair_" + n)) for n in FORMS) + " | "
              + f"{f(r['floor'])} {f(r['floor_pdl'])} {f(r['fp16'])}")


if __name__ == "__main__":
    main(sys.argv[1], *(tuple(map(int, sys.argv[2].split(","))) for _ in sys.argv[2:3]))
