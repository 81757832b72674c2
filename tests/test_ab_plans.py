"""``benchmarks/experiments/ab_plans.py``: an A/B's changed plans, as ``schedule_check.py`` reads them."""
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.experiments import ab_plans  # noqa: E402


def test_launch_rows_reads_each_launchs_rows_or_m_whole():
    assert ab_plans.launch_rows("rsmma.bm128.bn64.bk128.sk1.w4.s3.c2", 388) == [388]
    assert ab_plans.launch_rows("768: rsmma.bm256.bn128.bk64.sk1.w8.s5 + 16: rsmma.bm16.bn64.bk128.sk4.w4.s5.c3"
                                " (side by side)", 784) == [768, 16]
    assert ab_plans.launch_rows("768: a + 96: b + 2286: c", 3150) == [768, 96, 2286]


def row(M, variant, us):
    return dict(K=4096, N=4096, M=M, variant=variant, tunesearch_us=us)


def runs(a1, b, a2):
    return {"a1": a1, "b": b, "a2": a2}


def test_only_plans_that_differ_are_kept_with_the_a_runs_mean_over_b(tmp_path):
    split = "768: x + 16: y (side by side)"
    a1, b, a2 = [row(784, split, 44.0), row(500, "z", 26.5)], [row(784, "w", 46.0), row(500, "z", 26.8)], \
        [row(784, split, 46.0), row(500, "z", 26.9)]
    assert ab_plans.changed_plans(runs(a1, b, a2), "ab.txt") == [
        dict(file="ab.txt", K=4096, N=4096, M=784, before=[784], after=[768, 16], ratio=round(45.0 / 46.0, 4))]
    with pytest.raises(ValueError, match="planned"):  # the A runs must agree on the plan, or the A/B is no A/B
        ab_plans.changed_plans(runs(a1, b, [row(784, "w", 46.0), row(500, "z", 26.9)]), "ab.txt")
    for k, rows in runs(a1, b, a2).items():
        (tmp_path / f"bench_t_{k}.json").write_text(json.dumps({"rows": rows}))
    out = tmp_path / "plans.json"
    out.write_text(json.dumps({"note": "kept", "plans": [dict(file="ab.txt", K=4096, N=4096, M=784, before=[1],
                                                              after=[1], ratio=2.0),
                                                         dict(file="old.txt", K=1, N=1, M=1, before=[1], after=[1],
                                                              ratio=1.0)]}))
    ab_plans.main(str(tmp_path), "t", "ab.txt", str(out))  # the same file's plan replaced, another file's kept
    written = json.loads(out.read_text())
    assert written["note"] == "kept"
    assert [(p["file"], p["M"], p["ratio"]) for p in written["plans"]] == [("old.txt", 1, 1.0),
                                                                         ("ab.txt", 784, round(45 / 46, 4))]
