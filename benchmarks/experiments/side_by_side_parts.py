"""A side-by-side plan taken apart, graph-timed with rotation (NOTES.md row 124, plan item 2).

    [PRICE=1.05] python benchmarks/experiments/side_by_side_parts.py OUT [K,N,M ...]

For each key, the plan ``OVERLAP_PRICE`` gives it (PRICE, default the dispatch's own: then the plan is the
packaged table's; a plan not run side by side is skipped), and in one process: M whole (its own pick, one
launch), each launch of the plan alone (its rows with its own pick: sliced from M's operands, then on operands
of its own rows as the sweep timed its bucket), the launches one after another on one stream, and side by side
as the dispatch runs them (largest first, on the stream of highest priority), beside what the scheduler model
and the table say (``_ShapeTable.side_by_side_us``, the H200's times). Each the least of three graph medians.
Default keys (the plans at 1.02, row 127 (e)): the one that ran level where 0.932 was predicted (4096x12288
M=450: 128 + 322; row 128 (b): its 128 rows ran 29.0 us against their bucket's 25.1, the clock's drift, not
the slice: the model's CTA time is what misses), M=470 of the same shape (128 + 342), and three that won as
predicted (4096x11008 M=270: 256 + 14; 4096x4096 M=780 and 11008x4096 M=780: 768 + 12). Writes
OUT/side_by_side_parts.json. (Rows 124-125 took apart the plans of 1.05.)"""
import json
import os
import sys

import torch

from tunesearch import dispatch, load_dispatch
from tunesearch.bench import Operands, graph_time
from tunesearch.gpu import gpu_info

KEYS = [(4096, 12288, 450), (4096, 12288, 470), (4096, 11008, 270), (4096, 4096, 780), (11008, 4096, 780)]
PRICE = float(os.environ.get("PRICE", dispatch.OVERLAP_PRICE))


def timed(fn, ops):
    """Least of three graph medians of ``fn(a, packed, scales)`` over the rotated copies."""
    return min(graph_time([lambda c=c: fn(c[0], c[1], c[2]) for c in ops.copies]).us for _ in range(3))


def plan_parts(M, N, K, whole, l2_bytes):
    """``dispatch.OVERLAP_PRICE`` set to PRICE (the caller resets it once the side-by-side call has run: its
    entry is built then), a fresh dispatcher (plans are fixed per entry), the plan it gives (M, N, K), the
    calls ``fn(a, packed, scales)`` that take it apart (the whole launch on ``whole``, a dispatcher that never
    splits; each launch alone, its rows on its own pick; the launches one after another on one stream; side by
    side as the dispatch runs them) and the rotated operands; None for the last two where the plan does not
    run side by side."""
    dispatch.OVERLAP_PRICE = PRICE
    split = load_dispatch()
    cuda = torch.device("cuda")
    plan = [r for r, _ in split.plan(M, N, K, cuda)]
    if not split.side_by_side(M, N, K, cuda):
        return split, plan, None, None
    starts = [sum(plan[:i]) for i in range(len(plan))]
    runs = {"whole": whole}
    for s, r in zip(starts, plan):
        runs[f"{r} alone"] = lambda a, p, q, s=s, r=r: whole(a[s:s + r], p, q)
    runs["serial"] = lambda a, p, q: [whole(a[s:s + r], p, q) for s, r in zip(starts, plan)]
    runs["side by side"] = split
    return split, plan, runs, Operands(M, N, K, 128, l2_bytes, layout=split.layout_for(N, K, cuda))


def main(out, keys=KEYS):
    l2 = gpu_info(0).l2_bytes
    whole = load_dispatch(split=False)
    rows = []
    cuda = torch.device("cuda")
    for K, N, M in keys:
        split, plan, runs, ops = plan_parts(M, N, K, whole, l2)
        if runs is None:  # nothing to take apart (the model prices the plan at serial, or one launch)
            print(f"{K}x{N} M={M} {plan}: not side by side, skipped")
            dispatch.OVERLAP_PRICE = None
            continue
        shape = split._shape_table(N, K, cuda)
        times = {name: timed(fn, ops) for name, fn in runs.items()}
        for r in plan:  # each launch on operands of its own rows, as the sweep timed its bucket
            times[f"{r} own"] = timed(whole, Operands(r, N, K, 128, l2, layout=split.layout_for(N, K, cuda)))
        dispatch.OVERLAP_PRICE = None
        model = {"model side by side": shape.side_by_side_us(tuple(plan), N, K, 132),
                 "table serial": shape.table_us(M, tuple(plan)), "table whole": shape.table_us(M)}
        model.update({f"{r} alone": shape.us[shape.index(r)] for r in plan})
        rows.append(dict(K=K, N=N, M=M, plan=plan, us=times, table_us=model))
        print(f"{K}x{N} M={M} {plan}: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items())
              + " | H200 table: " + ", ".join(f"{k} {v:.1f}" for k, v in model.items()))
    json.dump(dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows),
              open(f"{out}/side_by_side_parts.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], [tuple(int(x) for x in key.split(",")) for key in sys.argv[2:]] or KEYS)
