"""The split rule's side-by-side plans, made when a table is exported so that no call has to price them.

With ``dispatch.OVERLAP_PRICE`` set, the split rule prices each candidate plan that would run side by side
with the block scheduler model (``schedule.py``): at a key's first call that took 1.7 ms at the median and
up to half a second (NOTES.md row 126 (h)), host time a server whose prefill M varies pays again and again.
The export runs the rule here instead, for every M up to each shape's largest bucket, for calls made in a
graph capture and eagerly, and keeps in the shape's ``side_by_side`` entry the ranges of M whose plan is not
the serial rule's, with the settings it made them with (``dispatch.side_by_side_settings``). The runtime
takes a plan from there where its settings are the same (``_ShapeTable.planned``), else prices at the
call as before (an A/B of another OVERLAP_PRICE, a GPU of another SM count, a table made by other code).
"""
from __future__ import annotations

from collections.abc import Callable

from . import dispatch


def _spans(plans: dict[int, tuple[int, ...]]) -> list[list]:
    """{M: its launches} as ranges [lo, hi, the full buckets' rows] of consecutive M that share those rows
    (the rest is each M's own), ascending."""
    spans: list[list] = []
    for m in sorted(plans):
        rows = list(plans[m][:-1])
        if spans and spans[-1][1] == m - 1 and spans[-1][2] == rows:
            spans[-1][1] = m
        else:
            spans.append([m, m, rows])
    return spans


def shape_plans(shape: dispatch._ShapeTable, N: int, K: int, num_sms: int) -> dict:
    """A shape's ``side_by_side`` entry at the dispatch's settings now: for "captured" and "eager" calls,
    the ranges of M (up to its largest bucket) whose side-by-side plan is not the serial rule's."""
    floor = lambda rows: shape.side_by_side_floor(rows, N, K, num_sms)  # noqa: E731
    changed: dict = {"captured": {}, "eager": {}}
    for m in range(2, shape.m_maxes[-1] + 1):
        serial = shape.launches(m)
        for mode, eager in (("captured", False), ("eager", True)):
            price = lambda rows: shape.side_by_side_price(m, rows, N, K, num_sms, eager)  # noqa: B023, E731
            launches = shape.launches(m, price, floor)
            if launches != serial:
                changed[mode][m] = launches
    return {"settings": dispatch.side_by_side_settings(num_sms), **{mode: _spans(p) for mode, p in changed.items()}}


def shape_side_by_side(label: str, shape: dict, num_sms: int) -> dict:
    """A table shape's ``side_by_side`` entry: its buckets' digest and ``shape_plans``."""
    rules = dispatch._ShapeTable(shape["buckets"], shape["group_size"], label, shape.get("layout", "base"))
    plans = shape_plans(rules, shape["n"], shape["k"], num_sms)
    return {"buckets": dispatch.buckets_digest(shape["buckets"]), **plans}


def add_side_by_side_plans(table: dict, progress: Callable[[str], None] | None = None,
                           map_shapes: Callable | None = None) -> dict:
    """``table`` (``export.build_table``'s) with each shape's side-by-side plans, for the SM count of the GPU
    it was tuned on, where OVERLAP_PRICE is set (else as it is: the rule prices nothing side by side).
    ``progress(label)`` is told of each shape before its plans are made (seconds each). ``map_shapes``, where
    given, runs ``shape_side_by_side`` over the shapes as ``map`` does: a process pool's ``map`` makes them
    side by side, but its workers price with the dispatch's settings as imported, so pass one only where this
    process has changed none of them (an A/B's)."""
    if dispatch.OVERLAP_PRICE is None or dispatch.CONCURRENT is False:
        return table
    shapes = [(name, label, shape, entry["sm_count"]) for name, entry in table["gpus"].items()
              if entry.get("sm_count")  # a GPU row without it: its calls price at the call
              for label, shape in entry["shapes"].items()]
    if map_shapes is None:
        for name, label, shape, num_sms in shapes:
            if progress is not None:
                progress(f"{name} {label}")
            shape["side_by_side"] = shape_side_by_side(label, shape, num_sms)
        return table
    if progress is not None:
        for name, label, _, _ in shapes:
            progress(f"{name} {label}")
    entries = map_shapes(shape_side_by_side, *([job[k] for job in shapes] for k in (1, 2, 3)))
    for (_, _, shape, _), entry in zip(shapes, entries):
        shape["side_by_side"] = entry
    return table


def main(argv: list[str]) -> None:
    """``python -m tunesearch.overlap TABLE.json``: make a table's side-by-side plans again, in place, from
    its own buckets (after an edit of the split rule, the scheduler model or their settings)."""
    from .dispatch import read_table
    from .export import write_atomic

    if len(argv) != 1:
        raise SystemExit("usage: python -m tunesearch.overlap TABLE.json")
    table = read_table(argv[0])
    for entry in table["gpus"].values():
        for shape in entry["shapes"].values():
            shape.pop("side_by_side", None)
    write_atomic(argv[0], add_side_by_side_plans(table, lambda label: print(f"side-by-side plans: {label}")))
    print(f"wrote {argv[0]}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
