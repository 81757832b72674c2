"""EXPERIMENT: `tunesearch bench` under an earlier split rule, for a same-run A/B against this tree's (NOTES.md
rows 96-97).

    SPLIT_RULE=s47|s48a python benchmarks/experiments/split_rule_ab.py [tunesearch bench options]   (a CUDA GPU)

s47: M ran as two launches only where the table predicted them under 0.95 of the lesser of the pick's
times at its bucket's two ends, at every M of a bucket. s48a (commit 40e6652): a bar of 0.98, and at a
bucket's own largest M the pick's time there. This tree's rule (`export.SPLIT_GAIN`,
`dispatch._ShapeTable.whole_us`) also takes the pick's time at either end wherever M runs the same token
tiles as there. Run this with the rule's table (s47's: `git show 6276087:tunesearch/tables/h200.json`; s48a
ran this tree's) and `tunesearch bench` in one call: rows whose plan is the same show the run's drift.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from tunesearch import dispatch, export  # noqa: E402
from tunesearch.cli import app  # noqa: E402


# Each rule is this tree's `_ShapeTable.split` (any full bucket below M, the bar) with its own estimate of
# what M's own pick costs whole, in place of `_ShapeTable.whole_us`
def whole_s47(table, m):
    """The lesser of the pick's times at its bucket's two ends."""
    ends = table.ends[table.index(m)]
    return None if ends is None else min(ends[1:])


def whole_s48a(table, m):
    """At the bucket's own largest M, the pick's time there; elsewhere as s47."""
    i = table.index(m)
    return table.us[i] if m == table.m_maxes[i] and table.us[i] is not None else whole_s47(table, m)


RULES = {"s47": (0.95, whole_s47), "s48a": (0.98, whole_s48a)}

if __name__ == "__main__":
    gain, whole = RULES[os.environ.get("SPLIT_RULE", "s47")]
    export.SPLIT_GAIN = gain  # read at each call by two_launches_win
    dispatch._ShapeTable.whole_us = whole  # the bench's "table µs" for a whole launch follows it too
    app(["bench", *sys.argv[1:]])
