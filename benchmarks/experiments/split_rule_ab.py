"""EXPERIMENT: `tunesearch bench` under `_s47`'s split rule, for a same-run A/B against this tree's (NOTES.md
row 96).

    python benchmarks/experiments/split_rule_ab.py [tunesearch bench options]   (on a CUDA GPU)

`_s47` ran M as two launches only where the table predicted them under 0.95 of the lesser of the pick's
times at its bucket's two ends, at every M of a bucket. This tree's rule (`export.SPLIT_GAIN`,
`dispatch._ShapeTable.split`) takes 0.98, and at a bucket's own largest M weighs the pick's time there.
Run this with the `_s47` table (`git show 6276087:tunesearch/tables/h200.json`) and `tunesearch bench`
with this tree's in one call: the rows whose plan is the same in both show the run-to-run drift.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch import dispatch, export  # noqa: E402
from tunesearch.cli import app  # noqa: E402


def split_s47(self, m: int):
    """`_ShapeTable.split` as `_s47` had it: M's pick weighed at its bucket's two ends, even at the bucket's
    own largest M."""
    i = self.index(m)
    ends = self.ends_us[i]
    if ends is None or m > self.m_maxes[i]:
        return None
    best = None
    for j in reversed([j for j in self.full if j < i]):
        two = self.table_us(m, self.m_maxes[j])
        if two is not None and (best is None or two < best[0]):
            best = (two, self.m_maxes[j])
    return best[1] if best is not None and export.two_launches_win(best[0], *ends) else None


if __name__ == "__main__":
    export.SPLIT_GAIN = 0.95  # read at each call by two_launches_win
    dispatch._ShapeTable.split = split_s47
    app(["bench", *sys.argv[1:]])
