"""The runtime: load a dispatch table and pick the tuned variant per GPU, shape and M.

    mm = load_dispatch("dispatch.json")   # or load_dispatch() for the packaged tables
    y = mm(a, packed, scales)             # also torch.ops.tunesearch.w4a16_mm via mm.op

A table keeps each shape's weights in one layout (variants/layout.py); ``mm.prepare(packed, scales)``
stores base-layout weights in it, once at load (``quantize_model`` does). ``mm`` takes the weights in
either layout (their widths tell which) and picks among the variants tuned for that layout; base-layout
weights of a shape tuned in another layout run the nearest tuned shape's or a heuristic's pick, with a
note logged once (``strict=True``: an error instead).

Lookup on the hot path is one dict hit per (M, N, K); the first call of a new (M, N, K)
resolves the bucket (smallest m_max >= M; above the largest, the largest) and any fallback,
logging the fallback once. An M just past a bucket may run as two or three launches, full buckets below
and the rest, where the table's times say so (``Dispatcher.plan``), and those side by side on streams of
their own where the largest leaves SMs idle for the others (``Dispatcher.side_by_side``). Loading parses
JSON only: no code from the file is ever executed.
"""
from __future__ import annotations

import bisect
import functools
import hashlib
import inspect
import json
import logging
import math
import os
from importlib import resources
from pathlib import Path

import torch

from tunesearch.variants import DeviceLimits, Variant, heuristic_variants, reference_matmul, variant_error
from tunesearch.variants.api import check_inputs, input_grad, interpreting, make_launcher
from tunesearch.variants.layout import LAYOUTS, check_packed, layout_of, to_base, to_layout
from tunesearch.variants.space import CUBLAS_FAMILIES, launch_waves, token_tiles

from . import export, schedule
from .export import READABLE_SCHEMAS, SCHEMA, merge_tables, two_launches_win
from .shapes import edge_keys

log = logging.getLogger("tunesearch")
# the most launches a call of one M may take (``_ShapeTable.launches``): a full bucket, a second one and the
# rest. By the packaged H200 table a fourth would take at most 2.5% more off, and pass the rule's 2% bar at 64
# of the 20475 (shape, M) up to 4096 (NOTES.md row 116)
MAX_LAUNCHES = 3
# the order of a call's launches: by rows, most first, so that the one of fewest rows (often a pass over all
# the weights for a token or two) reads what the others left in L2: 1-3% off M=257, 513 and 1025 where a plan
# ran 2 + the rest, nothing elsewhere (NOTES.md row 119); else A's order
LARGEST_FIRST = True
# a split call's later launches on side streams of their own, forked from and joined back to the caller's:
# the launches are independent (rows of C apart, the weights only read), so the later ones' CTAs may run on
# the SMs the first leaves idle in its last wave (NOTES.md row 121). The first runs on a side stream of the
# highest priority, so that the block scheduler gives the SMs to its CTAs before the others'. "auto": where
# ``_ShapeTable.overlaps`` says they fit those SMs; True: every split call (an A/B setting); False: none
CONCURRENT = "auto"
HIGHEST = -100  # a stream priority PyTorch maps to the device's highest
# how much faster than their share of the SMs the later launches are taken to run on the idle ones (a
# memory-bound launch on fewer SMs gets more bandwidth each): fitted on row 121's A/B, where each launch
# that fit at 1.5 ran in the first's shadow (0.82-0.96 of the serial time) and none that did not was
# faster by more than 3%
OVERLAP_SLACK = 1.5
# side by side costs 20-40 us more of host time a call (events, streams): called eagerly, a plan the table
# puts under this many us is host-bound (4096x12288 M=257: 73-89 us a call side by side, 54-57 one after the
# other, where a graph replays it in 44.6 against 53.5), so it stays serial unless a graph is being captured
EAGER_SIDE_BY_SIDE_US = 100.0
# where set, the split rule prices a plan that runs side by side (``overlaps``) at this many times the block
# scheduler model's time (``_ShapeTable.side_by_side_price``) rather than its launches' summed times; None:
# summed (an A/B setting). Its first form, this factor times the largest launch's time where the others fit
# its idle SMs, lost 19-20% at 4096^2 M=770..890 on the H100, which the model predicts. The model, mended
# for M=450's miss (later launches packed into freed SMs), held out on the H100: of 18 plans it changed 13
# ran 0.918-0.987 of their former ones, 4 level, and 11008x4096 M=3150 1.029x, where a plan that fills the
# SMs a last wave leaves idle lowers the SM clock (power cap), which it lacked (NOTES.md rows 122-125). With
# that clock term (``schedule.CLOCK_DROP``, row 126) the model puts 94 of the 95 A/B plans so far on their
# measured side of 1; at 1.02 its held-out A/B on the H100 (row 126 (i)) changed 35 plans: 30 faster
# (0.856-0.983), 5 level, none slower. The export makes its plans (``overlap.py``, row 127): a call takes
# them from the table, and prices them itself only where they were made with other settings
OVERLAP_PRICE = 1.02
# with OVERLAP_PRICE set, a side-by-side plan replaces a chosen plan that itself runs side by side only where
# priced under this share of it: the model's typical error is 1.4% (NOTES.md row 126), so a finer difference
# between two of its prices is its noise (4096x12288 M=257: 16 + 241 priced 0.03% under 2 + 255)
SIDE_BY_SIDE_LEVEL = 0.99
# whether a later launch whose pick runs in clusters (CLUSTER > 1) may run beside the largest (``overlaps``).
# An A/B setting: on the H100 8 clustered rows beside 253 ran 22% slower than their unclustered twin in the
# same plan (NOTES.md row 138), yet on the H200 2 clustered rows beside 511 and 32 beside 1268 ran faster
# than one after the other (row 121); False has not been timed against True at the M whose plans it changes
CLUSTERS_BESIDE = True
_side_streams: dict[tuple, tuple] = {}


def _sides(main, count: int) -> tuple:
    """The caller's stream ``main``'s fork event, ``count`` side streams (the first of the highest priority)
    and each one's join event, the same ones each call: each caller's stream has its own, so that no two
    callers' work (a graph being captured on one) meets on a side stream, and each side stream has its own
    split-K counters."""
    key = (main.device, main.cuda_stream, count)
    sides = _side_streams.get(key)
    if sides is None:
        streams = [torch.cuda.Stream(main.device, priority=HIGHEST if i == 0 else 0) for i in range(count)]
        sides = _side_streams[key] = (torch.cuda.Event(), streams, [torch.cuda.Event() for _ in streams])
    return sides


def _run_side_by_side(spans, a, packed, scales, out):
    """Each launch of ``spans`` [(start, stop, launcher)], largest first, on a side stream of its own after
    what the caller's stream has queued (A, C's memory); the caller's stream goes on once every launch has
    written its rows. Events and streams are set directly: ``torch.cuda.stream``'s context and
    ``wait_stream`` look the device up each time (166-170 us of host time a call on the H200's host,
    against 46-103 so, NOTES.md row 121)."""
    main = torch.cuda.current_stream(a.device)
    fork, streams, joins = _sides(main, len(spans))
    fork.record(main)
    try:
        for stream, join, (start, stop, part) in zip(streams, joins, spans):
            stream.wait_event(fork)
            torch.cuda.set_stream(stream)  # the launch's workspace is allocated on the stream that uses it
            part(a[start:stop], packed, scales, out[start:stop])
            join.record(stream)
    finally:
        torch.cuda.set_stream(main)
    for join in joins:
        main.wait_event(join)
    return out


class DispatchError(ValueError):
    pass


def read_table(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise DispatchError(f"dispatch table {str(path)!r} does not exist")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DispatchError(f"dispatch table {str(path)!r} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("schema") not in READABLE_SCHEMAS:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise DispatchError(f"dispatch table {str(path)!r} has schema {found!r}; this tunesearch reads {SCHEMA!r}")
    if not isinstance(data.get("gpus"), dict):
        raise DispatchError(f"dispatch table {str(path)!r} has no 'gpus' mapping")
    return data


@functools.cache
def _rule_code() -> str:
    """A digest of the code the split rule's side-by-side plans come from (the block scheduler model,
    ``_ShapeTable``, the launches' grids and tiles, the rule's bar): plans made by other code are not this
    tunesearch's."""
    try:
        text = "".join(inspect.getsource(code) for code in (schedule, _ShapeTable, launch_waves, token_tiles,
                                                               two_launches_win))
    except (OSError, TypeError):  # no source to read (a frozen install): no stored plan is taken as its own
        return "unknown"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def side_by_side_settings(num_sms: int) -> dict:
    """What the split rule's side-by-side plans depend on besides the table's buckets, read now (an A/B
    may set any of them): a table's stored plans (``_ShapeTable.planned``) serve only calls made with the
    same."""
    return {"overlap_price": OVERLAP_PRICE, "concurrent": CONCURRENT, "clock_drop": schedule.CLOCK_DROP,
            "level": SIDE_BY_SIDE_LEVEL, "overlap_slack": OVERLAP_SLACK, "eager_us": EAGER_SIDE_BY_SIDE_US,
            "max_launches": MAX_LAUNCHES, "split_gain": export.SPLIT_GAIN, "num_sms": num_sms,
            "clusters_beside": CLUSTERS_BESIDE,
            "rule": _rule_code()}


def buckets_digest(buckets: list[dict]) -> str:
    """A digest of what a shape's split rule reads from its buckets (their M, picks and times)."""
    rows = [[b.get("m_max"), b.get("variant"), b.get("us"), b.get("edge")] for b in buckets]
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]


def _read_side_plans(data, where: str) -> tuple[dict, dict]:
    """A shape's ``side_by_side`` entry (``tunesearch.overlap.shape_plans``) as (its settings, for
    each of "captured" and "eager" the ranges' first M and the ranges (lo, hi, full buckets' rows))."""
    try:
        settings, modes = dict(data["settings"]), {}
        for mode in ("captured", "eager"):
            spans = [(int(lo), int(hi), tuple(int(r) for r in rows)) for lo, hi, rows in data[mode]]
            if any(lo > hi or not rows or sum(rows) >= lo for lo, hi, rows in spans) or \
                    any(a[1] >= b[0] for a, b in zip(spans, spans[1:])):
                raise ValueError(f"{mode} ranges must ascend apart, each M past its full buckets' rows")
            modes[mode] = ([lo for lo, _, _ in spans], spans)
    except (KeyError, TypeError, ValueError) as exc:
        raise DispatchError(f"{where}: bad side_by_side plans: {exc}") from None
    return settings, modes


class _ShapeTable:
    __slots__ = ("m_maxes", "variants", "us", "full", "ends", "group_size", "layout", "side_plans", "_us_at",
                 "_grids")

    def __init__(self, buckets: list[dict], group_size: int, where: str, layout: str = "base",
                 side_plans: dict | None = None):
        rows = []
        for b in buckets:
            try:
                variant = Variant.from_dict(b["variant"])
                m_max = int(b["m_max"])
                us = float(b["us"]) if b.get("us") is not None else None
                edge = b.get("edge")
                edge = (int(edge["m"]), float(edge["us"])) if edge is not None else None
            except (KeyError, TypeError, ValueError) as exc:
                raise DispatchError(f"{where}: bad bucket {b!r}: {exc}") from None
            rows.append((m_max, variant, us, edge))
        if not rows:
            raise DispatchError(f"{where}: no buckets")
        rows.sort(key=lambda r: r[0])
        self.m_maxes = [r[0] for r in rows]
        self.variants = [r[1] for r in rows]
        self.us = [r[2] for r in rows]
        self.group_size = group_size
        self.layout = layout
        # the buckets that are not edge keys (a bucket of one M, the next one's smallest), ascending
        edges = edge_keys(self.m_maxes)
        self.full = [i for i, m in enumerate(self.m_maxes) if m not in edges]
        # each bucket's smallest M and its pick's times there and at the bucket's largest M, where both are
        # known: an edge key (one M) and a bucket whose "edge" is one past the full bucket below; else None
        self.ends = []
        for i, (m, _, us, edge) in enumerate(rows):
            j = max((j for j in self.full if j < i), default=None)
            if m in edges:
                self.ends.append((m, us, us))
            elif edge is not None and j is not None and edge[0] == self.m_maxes[j] + 1 and us is not None:
                self.ends.append((edge[0], edge[1], us))
            else:
                self.ends.append(None)
        # each M's bucket time up to the largest bucket (made at the first split the rule weighs: half a
        # table's load time where most shapes never split), and per (N, K, SMs) each M's ``grid`` as asked: the
        # split rule weighs thousands of launches of the same rows (a key's first call, the export's plans)
        self._us_at = None
        self._grids = {}
        # plans made for other buckets (a table edited since its export) are not these buckets' plans
        own = side_plans is not None and side_plans.get("buckets") == buckets_digest(buckets)
        self.side_plans = _read_side_plans(side_plans, where) if own else None

    def index(self, m: int) -> int:
        return min(bisect.bisect_left(self.m_maxes, m), len(self.m_maxes) - 1)

    def pick(self, m: int) -> Variant:
        return self.variants[self.index(m)]

    def launches(self, m: int, side_by_side=None, floor=None) -> tuple[int, ...]:
        """The rows of each launch that runs M, in A's order: (M,) to run it whole, or full buckets below M
        (each with its pick) and the rest (with the pick of the rest's bucket), where the table's times say
        that is faster than M's own pick.

        A token tile is paid in full however few of its rows M fills, so one M past a bucket can cost a
        whole tile row more (4096x22016: 266 us at M=1024, 310 at 1025, where cuBLAS takes 262). Two launches,
        M=1024 and M=1, take 266 + 17. Every full bucket below is a candidate, not only the largest: a
        bucket whose tiles fit its M no better than a larger one's (4096x22016 M=896: 267 us, as M=1024's
        256-token tiles) leaves M past it faster as the bucket below that and the rest (768 + 132: 235).
        A third launch, a second full bucket, splits a rest that itself falls just past a bucket (11008x4096
        M=1300: 1024 + 32 + 244 predicted at 168 us, against 1024 + 276 at 178; ran 165.9 against 176.0,
        NOTES.md row 116).
        Predicted from the table only, on the safe side: each launch at its bucket's time (at its largest M),
        against what M's pick is taken to cost whole (``whole_us``); each launch more must win by
        ``export.two_launches_win``, the rule the export weighs when it picks for a bucket. Ties go to
        fewer launches, then to the larger first one. ``side_by_side(rows)``, where given, prices a plan that
        would run side by side (an A/B setting, ``OVERLAP_PRICE``), or None to keep its summed time: the
        plan of least price then replaces the one chosen above where it costs less than that one.
        ``floor(rows)``, where given, is at most that price wherever there is one: a plan whose floor cannot
        come under the least price so far, nor under the chosen plan's, is not priced (the same plan, fewer
        scheduler runs: ``side_by_side_floor``)."""
        i = self.index(m)
        whole = self.whole_us(m) if m <= self.m_maxes[i] else None
        if whole is None:
            return (m,)
        below = [self.m_maxes[j] for j in reversed(self.full) if j < i]  # largest first, each under m
        if below and self._us_at is None:
            self._us_at = [self.us[self.index(r)] for r in range(self.m_maxes[-1] + 1)]
        best = {}  # launches -> (their summed time, their rows)
        candidates = []  # (rows, their summed time), in the loop's order
        for first in below:
            seconds = [r for r in below if r <= first and first + r < m] if MAX_LAUNCHES > 2 else []
            for second in [None] + seconds:
                rows = (first, m - first) if second is None else (first, second, m - first - second)
                times = [self._us_at[r] for r in rows]  # as ``table_us``, which this loop runs too often to call
                if None in times:
                    continue
                us = sum(times)
                if len(rows) not in best or us < best[len(rows)][0]:
                    best[len(rows)] = (us, rows)
                candidates.append((rows, us))
        chosen_us, chosen = whole, (m,)
        for count in sorted(best):
            us, rows = best[count]
            if two_launches_win(us, chosen_us):
                chosen_us, chosen = us, rows
        if side_by_side is None:
            return chosen
        # the least side-by-side price (its margin its own) replaces only a plan it undercuts, that plan priced
        # as it runs: one it priced lower keeping a plan of more launches from winning would leave M on a
        # plan predicted slower (4096x22016 M=1060: 144 + 916 priced 287.7 us kept 768 + 64 + 228 at 282.9
        # from beating it by SPLIT_GAIN), and a plan priced as the chosen one only churns: level within float
        # rounding too (4096x12288 M=80 at OVERLAP_PRICE 1.0: 8 + 72 priced 24.641999999999992 us against the
        # whole launch's 24.642, its 72 rows on the same pick and the 8 wholly beside them)
        own = side_by_side(chosen) if len(chosen) > 1 else None
        bar = (1 - 1e-9) * chosen_us if own is None or own >= chosen_us else SIDE_BY_SIDE_LEVEL * own
        side, side_us = None, math.inf  # the least price under its plan's summed time; ties: the first
        for rows, us in candidates:
            if floor is not None and floor(rows) >= min(side_us, bar, us):
                continue  # priced, it could not beat its own summed time, be the least, or replace the chosen plan
            priced = side_by_side(rows)
            if priced is not None and priced < us and priced < side_us:
                side, side_us = rows, priced
        return side if side_us < bar else chosen

    def planned(self, m: int, eager: bool, settings: dict) -> tuple[int, ...] | None:
        """``launches`` for M as priced side by side, from the plans the export made (``side_plans``) with
        ``settings`` (``side_by_side_settings``), for a call made eagerly or in a graph capture; None where
        the table holds none made with those settings (another OVERLAP_PRICE, another GPU's SM count, another
        rule)."""
        if self.side_plans is None or self.side_plans[0] != settings:
            return None
        starts, spans = self.side_plans[1]["eager" if eager else "captured"]
        j = bisect.bisect_right(starts, m) - 1
        if j >= 0 and m <= spans[j][1]:
            rows = spans[j][2]  # the full buckets; the rest is M's
            return rows + (m - sum(rows),)
        return self.launches(m)

    def whole_us(self, m: int) -> float | None:
        """What one launch of M's own pick is taken to cost at M (M within the table's buckets), from the
        pick's times at its bucket's smallest and largest M. A launch's time is a step function of its
        token tiles (``space.token_tiles``: the same tiles, the same launch), so M with as many as one end
        takes that end's time (4096x11008 M=1200, bucket 1280's 128-token tiles, 10 rows of them: its 175
        us, not the 140 of M=1025's 9), and M between them the line between the two in tiles (measured
        within 1.02-1.03 at M=3500, NOTES.md row 97). The dequantize-then-cuBLAS route has no tiles of ours:
        its time grows with M as cuBLAS's does, so M between the ends takes the line between them in M
        (4096^2 M=1100 in bucket 1280: 63.4 us, the ends 1025 and 1280 about 58 and 69; the lesser end
        would keep it whole where two launches ran in 57.5, NOTES.md row 106). Where the tiles say nothing
        (below a tile's own rows the smallest M can be the slower), the lesser end; None where the table has
        neither."""
        i = self.index(m)
        v = self.variants[i]
        tiles = token_tiles(v.family, v.params, m)
        at_max = token_tiles(v.family, v.params, self.m_maxes[i])
        if self.us[i] is not None and (m == self.m_maxes[i] or tiles is not None and tiles == at_max):
            return self.us[i]
        if self.ends[i] is None:
            return None
        edge, edge_us, max_us = self.ends[i]
        if m == edge:
            return edge_us
        if v.family in CUBLAS_FAMILIES:
            return edge_us + (max_us - edge_us) * (m - edge) / (self.m_maxes[i] - edge)
        at_edge = token_tiles(v.family, v.params, edge)
        if tiles is None or at_edge is None or at_max is None or at_max <= at_edge:
            return min(edge_us, max_us)
        return edge_us + (max_us - edge_us) * (tiles - at_edge) / (at_max - at_edge)

    def grid(self, rows: int, N: int, K: int, num_sms: int) -> tuple[float, int, int, float] | None:
        """(its bucket time, its CTAs, the CTAs that run at once, its CTAs' work spread evenly over the SMs in
        us) of a launch of ``rows`` by its bucket's pick (``space.launch_waves``); None where the table or the
        family cannot say."""
        known = self._grids.setdefault((N, K, num_sms), {})
        if rows not in known:
            v, us = self.pick(rows), self.us[self.index(rows)]
            waves = launch_waves(v.family, v.params, rows, N, K, num_sms)
            if waves is None or us is None:
                known[rows] = None
            else:  # a wave's time x the SMs' share its CTAs fill
                ctas, at_once = waves
                known[rows] = (us, ctas, at_once, us * ctas / (-(-ctas // at_once) * at_once))
        return known[rows]

    def wave_room(self, launches: tuple[int, ...], N: int, K: int, num_sms: int) -> tuple[float, float, float] | None:
        """(the later launches' bucket times summed, the idle SMs' share of one of the largest launch's waves
        in us, the largest's bucket time) for a plan of several launches: the largest's wave takes its bucket
        time over its waves (``space.launch_waves``), and its last wave leaves the rest of the SMs idle.
        None where the table or the family cannot say."""
        first, *later = sorted(launches, reverse=True)
        grid = self.grid(first, N, K, num_sms)
        later_us = [self.us[self.index(r)] for r in later]
        if not later or grid is None or None in later_us:
            return None
        first_us, ctas, at_once, _ = grid
        count = -(-ctas // at_once)  # its waves
        idle = 1 - (ctas - (count - 1) * at_once) / at_once  # the share of the SMs its last wave leaves
        return sum(later_us), idle * first_us / count, first_us

    def side_by_side_us(self, launches: tuple[int, ...], N: int, K: int, num_sms: int) -> float | None:
        """A plan's time side by side by the block scheduler's model (``schedule.side_by_side_us``): each
        launch's CTAs at their bucket time over their waves, at the CTAs an SM the table timed them at, most
        rows first in priority, at the SM clock of the plan's busy SMs. None where the table or a family cannot
        say."""
        waves = []
        for rows in sorted(launches, reverse=True):
            grid = self.grid(rows, N, K, num_sms)
            if grid is None:
                return None
            us, ctas, at_once, _ = grid
            per_sm, count = at_once // num_sms, -(-ctas // at_once)
            alone = per_sm if count > 1 else min(per_sm, -(-ctas // num_sms))  # as the table timed it
            waves.append((ctas, per_sm, us / count, alone))
        return schedule.side_by_side_us(tuple(waves), num_sms, schedule.CLOCK_DROP)  # read now: an A/B may set it

    def side_by_side_price(self, m: int, launches: tuple[int, ...], N: int, K: int, num_sms: int,
                           eager: bool) -> float | None:
        """OVERLAP_PRICE times the scheduler model's time for a plan of ``launches`` where the call would
        run it side by side (``side_by_side_us``; ``Dispatcher.plan`` asks only with OVERLAP_PRICE set), else
        None (one launch after another, at their summed times): every split plan with CONCURRENT True, else
        where ``overlaps`` says so, and called eagerly only where its serial time reaches
        EAGER_SIDE_BY_SIDE_US (4096x11008 M=257 as 256 + 1 costs 53.0 us serial by the table, against 51.7
        whole)."""
        if len(launches) < 2:
            return None
        if CONCURRENT is not True:
            if not self.overlaps(launches, N, K, num_sms):
                return None
            if eager and (self.table_us(m, launches) or 0.0) < EAGER_SIDE_BY_SIDE_US:
                return None
        us = self.side_by_side_us(launches, N, K, num_sms)
        return None if us is None else OVERLAP_PRICE * us

    def side_by_side_floor(self, launches: tuple[int, ...], N: int, K: int, num_sms: int) -> float:
        """At most ``side_by_side_price`` for a plan of ``launches``, wherever it has one, without running the
        scheduler model: OVERLAP_PRICE times the larger of two times the model never comes under (the slack is
        for float rounding): its largest launch's bucket time (that launch's CTAs go first, placed and timed as
        alone, and the clock only slows them) and its CTAs' work spread evenly over the SMs (each CTA holds
        its share of an SM for at least its time alone). Infinite where the model cannot price it."""
        known = self._grids.get((N, K, num_sms), {})
        largest = work = 0.0
        for rows in launches:
            # ``grid``'s cache read here rather than through it: the rule asks for a floor for most
            # candidates of every M, and the call was a fifth of the export's pricing time (5.7 -> 4.5 s a shape)
            grid = known[rows] if rows in known else self.grid(rows, N, K, num_sms)
            if grid is None:
                return math.inf
            largest, work = max(largest, grid[0]), work + grid[3]
        return (1 - 1e-12) * OVERLAP_PRICE * max(largest, work)

    def overlaps(self, launches: tuple[int, ...], N: int, K: int, num_sms: int) -> bool:
        """Whether a split call's later launches should run beside its largest one: where that one's last wave
        leaves SMs idle for long enough that the others, on those SMs alone, would end within it: their bucket
        times, summed, must fit in the idle SMs' share of one of its waves (``wave_room``), OVERLAP_SLACK times
        over (4096x12288 M=257: 255 rows on 96 CTAs of 132 SMs, 42.5 us, beside 2 rows at 11.3: 44.8 us against
        53.7 one after the other, NOTES.md row 121). Where the first fills its last wave, the others only crowd
        its SMs (11008x4096 M=257, 128 CTAs: 7% slower). With CLUSTERS_BESIDE False, nor where a later launch's
        pick runs in clusters (CLUSTER > 1), whose pairs of CTAs must find pairs of free SMs in one GPC beside
        the first launch's."""
        if not CLUSTERS_BESIDE and any(self.pick(rows).params.get("CLUSTER", 1) > 1
                                       for rows in sorted(launches, reverse=True)[1:]):
            return False
        room = self.wave_room(launches, N, K, num_sms)
        return room is not None and room[0] <= OVERLAP_SLACK * room[1]

    def table_us(self, m: int, launches: tuple[int, ...] | None = None) -> float | None:
        """The table's time for M, run whole or as launches of ``launches`` rows. Whole: what the split
        rule takes it to cost (``whole_us``), or past the largest bucket (or where that is unknown) the
        bucket's time at its largest M. Split: each launch's bucket time (at the bucket's largest M),
        summed. None where a bucket has none."""
        if launches is None or len(launches) == 1:
            whole = self.whole_us(m) if m <= self.m_maxes[-1] else None
            times = [whole if whole is not None else self.us[self.index(m)]]
        else:
            times = [self.us[self.index(r)] for r in launches]
        return None if None in times else sum(times)


class _GPUTable:
    def __init__(self, entry: dict, where: str):
        self.name = entry.get("name")
        self.capability = str(entry.get("capability") or "0.0")
        self.sm_count = entry.get("sm_count")
        self.versions = entry.get("versions") or {}
        self.shapes: dict[tuple[int, int], _ShapeTable] = {}
        for label, shape in (entry.get("shapes") or {}).items():
            try:
                n, k, g = int(shape["n"]), int(shape["k"]), int(shape["group_size"])
            except (KeyError, TypeError, ValueError) as exc:
                raise DispatchError(f"{where}: shape {label!r} is malformed: {exc}") from None
            layout = shape.get("layout", "base")
            if layout not in LAYOUTS:
                raise DispatchError(f"{where}: shape {label!r} has unknown layout {layout!r}")
            self.shapes[(n, k)] = _ShapeTable(shape.get("buckets") or [], g, f"{where} shape {label}", layout,
                                              shape.get("side_by_side"))


def _capability_distance(a: str, b: str) -> float:
    try:
        return abs(float(a) - float(b))
    except ValueError:
        return float("inf")


def nearest_table(tables: list[_GPUTable], name: str, capability: str, sm_count: int) -> _GPUTable:
    """Of ``tables`` (other GPUs'), the one to run on GPU ``name``, which none was swept on: the nearest compute
    capability, then the nearest SM count, then the longest start of the name shared with the table's GPU
    ("NVIDIA H200 NVL" takes the H200's table, "NVIDIA H100 PCIe" the H100 80GB HBM3's), then the first."""
    def distance(table: _GPUTable):
        shared = len(os.path.commonprefix([name, table.name or ""]))
        return (_capability_distance(table.capability, capability), abs((table.sm_count or sm_count) - sm_count),
                -shared)
    return min(tables, key=distance)


class Dispatcher:
    """A callable ``mm(a, packed, scales)`` backed by a dispatch table."""

    def __init__(self, table: dict, *, group_size: int = 128, strict: bool = False, split: bool = True,
                 source: str = "?"):
        self.group_size, self.strict, self.split, self.source = group_size, strict, split, source
        self.gpus = {name: _GPUTable(entry, f"{source} gpu {name}") for name, entry in table["gpus"].items()}
        for gpu in self.gpus.values():
            for (n, k), shape in gpu.shapes.items():
                if shape.group_size != group_size:
                    raise DispatchError(f"{source}: shape {n}x{k} on {gpu.name} was tuned with group size "
                                        f"{shape.group_size}, this runtime was asked for {group_size}")
        self._by_device: dict[int, _GPUTable | None] = {}
        self._cache: dict[tuple, tuple] = {}
        self._logged: set = set()
        self.op = None

    # -- choosing ----------------------------------------------------------------------------
    def _once(self, key, level, msg, *args):
        if key not in self._logged:
            self._logged.add(key)
            log.log(level, msg, *args)

    def table_for(self, device: torch.device) -> _GPUTable | None:
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index in self._by_device:
            return self._by_device[index]
        props = torch.cuda.get_device_properties(index)
        name, cap = props.name, f"{props.major}.{props.minor}"
        table = self.gpus.get(name)
        if table is None and self.gpus:
            nearest = nearest_table(list(self.gpus.values()), name, cap, props.multi_processor_count)
            if _capability_distance(nearest.capability, cap) <= 1.0:
                self._once(("gpu", name), logging.WARNING, "tunesearch: no table for %s (sm %s); using the "
                           "table of %s (sm %s). Run `tunesearch sweep` and `export` on this GPU.",
                           name, cap, nearest.name, nearest.capability)
                table = nearest
        if table is None and self.strict:
            raise DispatchError(f"no dispatch table for GPU {name!r} (sm {cap}) in {self.source}")
        if table is not None:
            import triton

            tuned = table.versions.get("triton")
            if tuned and tuned != triton.__version__:
                self._once(("triton", name), logging.WARNING, "tunesearch: table for %s was tuned with "
                           "triton %s, running %s", table.name, tuned, triton.__version__)
        self._by_device[index] = table
        return table

    def _table_of(self, device: torch.device) -> _GPUTable | None:
        """The table for ``device``: its GPU's on CUDA; for CPU tensors (kernels run there only under the
        interpreter) the first table's."""
        return self.table_for(device) if device.type == "cuda" else next(iter(self.gpus.values()), None)

    def layout_for(self, N: int, K: int, device: torch.device) -> str:
        """The layout the table keeps (N, K)'s weights in on ``device`` (base for a shape it does not hold)."""
        table = self._table_of(device)
        shape = table.shapes.get((N, K)) if table is not None else None
        return shape.layout if shape is not None else "base"

    def prepare(self, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """``packed`` (base layout, as ``quantize_pack`` makes it, or another: a checkpoint saved with another
        GPU's table) stored in the layout the table keeps this shape in on its device: call once when the
        weights are loaded, then pass the result to ``mm``."""
        K, N = check_packed(packed, scales, self.group_size)
        want = self.layout_for(N, K, packed.device)
        if layout_of(packed, scales) == want:
            return packed
        return to_layout(to_base(packed, scales), want)

    def resolve(self, M: int, N: int, K: int, device: torch.device, layout: str | None = None) -> Variant | None:
        """The variant for (M, N, K) on ``device`` with the weights in ``layout`` (None: the layout the table
        keeps the shape in, so its pick); None means dequantize-then-matmul."""
        G = self.group_size
        if layout is None:
            layout = self.layout_for(N, K, device)
        if device.type != "cuda" and not interpreting():
            return self._fallback(("cpu", N, K), f"{device} tensors")
        table = self._table_of(device)
        if table is None:
            return self._fallback(("gpu", device), "no table for this GPU")
        limits = DeviceLimits.of(device)  # a table's pick may need what this device lacks (Gluon, memory)
        shape = table.shapes.get((N, K))
        if shape is not None and shape.layout == layout:
            variant = shape.pick(M)
            if variant_error(variant, M, N, K, G, limits, layout=layout) is None:
                return variant
        if shape is not None and shape.layout != layout:
            if self.strict:
                raise DispatchError(f"shape N={N} K={K} was tuned with its weights in layout {shape.layout}, these "
                                    f"are in {layout}: mm.prepare(packed, scales) stores them so once")
            self._once(("layout", N, K, layout), logging.WARNING, "tunesearch: N=%d K=%d was tuned with its weights "
                       "in layout %s, these are in %s: mm.prepare(packed, scales) stores them so once", N, K,
                       shape.layout, layout)
        elif self.strict:
            raise DispatchError(f"shape N={N} K={K} (M={M}) is not in the table for {table.name}")
        # unknown shape: the nearest known shape's pick for this M, if it is valid here
        for (n, k) in sorted(table.shapes, key=lambda s: abs(s[0] - N) + abs(s[1] - K)):
            variant = table.shapes[(n, k)].pick(M)
            if variant_error(variant, M, N, K, G, limits, layout=layout) is None:
                self._once(("near", M, N, K), logging.INFO, "tunesearch: N=%d K=%d M=%d untuned; using "
                           "%s tuned for N=%d K=%d", N, K, M, variant.id, n, k)
                return variant
        seeds = heuristic_variants(M, N, K, G, limits, layout)
        if seeds:
            self._once(("heur", M, N, K), logging.INFO, "tunesearch: N=%d K=%d M=%d untuned; using "
                       "heuristic %s", N, K, M, seeds[0].id)
            return seeds[0]
        return self._fallback(("shape", M, N, K), f"no kernel variant can run M={M} N={N} K={K}")

    def plan(self, M: int, N: int, K: int, device: torch.device, layout: str | None = None, *,
             eager: bool = False) -> list[tuple]:
        """What a call of (M, N, K) launches: [(rows, variant)], A's rows in order, one entry unless the
        table says more launches are faster (``_ShapeTable.launches``: M just past a bucket); a variant None
        means dequantize-then-matmul. With OVERLAP_PRICE set, a plan that would run side by side is priced
        so, which a call made outside a graph capture (``eager``) does only for plans of
        EAGER_SIDE_BY_SIDE_US or more: the two may differ."""
        if layout is None:
            layout = self.layout_for(N, K, device)
        shape = self._shape_table(N, K, device)
        if not self.split or shape is None or shape.layout != layout:
            launches = (M,)
        elif OVERLAP_PRICE is None or CONCURRENT is False or device.type != "cuda":
            launches = shape.launches(M)
        else:
            sms = DeviceLimits.of(device).num_sms
            launches = shape.planned(M, eager, side_by_side_settings(sms))  # the export's, else priced now
            if launches is None:
                price = lambda rows: shape.side_by_side_price(M, rows, N, K, sms, eager)  # noqa: E731
                floor = lambda rows: shape.side_by_side_floor(rows, N, K, sms)  # noqa: E731
                launches = shape.launches(M, price, floor)
        if len(launches) > 1:
            parts = [(rows, self.resolve(rows, N, K, device, layout)) for rows in launches]
            if all(v is not None and v == shape.pick(m) for m, v in parts):  # all the table's own picks
                self._once(("split", M, N, K), logging.INFO, "tunesearch: N=%d K=%d M=%d runs as %s", N, K, M,
                           " and ".join(f"M={m} ({v.id})" for m, v in parts))
                return parts
        return [(M, self.resolve(M, N, K, device, layout))]

    def side_by_side(self, M: int, N: int, K: int, device: torch.device, layout: str | None = None) -> bool:
        """Whether a call of (M, N, K) runs its launches side by side, on streams of their own (CONCURRENT):
        never for one launch or off a CUDA device."""
        parts = self.plan(M, N, K, device, layout)
        return CONCURRENT is True and len(parts) > 1 and device.type == "cuda" or \
            CONCURRENT == "auto" and self._overlaps(parts, N, K, device)

    def _overlaps(self, parts, N: int, K: int, device: torch.device) -> bool:
        """The rule's word on a plan of several launches (``_ShapeTable.overlaps``), on a CUDA device."""
        if len(parts) < 2 or device.type != "cuda":
            return False
        rows = tuple(r for r, _ in parts)
        return self._shape_table(N, K, device).overlaps(rows, N, K, DeviceLimits.of(device).num_sms)

    def _shape_table(self, N: int, K: int, device: torch.device) -> _ShapeTable | None:
        table = self._table_of(device)
        return table.shapes.get((N, K)) if table is not None and (device.type == "cuda" or interpreting()) else None

    def table_us(self, M: int, N: int, K: int, device: torch.device, layout: str | None = None) -> float | None:
        """What the table says a call of (M, N, K) takes as ``plan`` runs it (``_ShapeTable.table_us``);
        None where a launch is not the table's own pick (an untuned shape, a fallback). The bench shows
        it beside the measured time: a table that no longer matches the GPU, or a split rule whose
        prediction misses, shows there."""
        parts = self.plan(M, N, K, device, layout)
        shape = self._shape_table(N, K, device)
        if shape is None or any(v is None or v != shape.pick(rows) for rows, v in parts):
            return None
        return shape.table_us(M, tuple(rows for rows, _ in parts))

    def _fallback(self, key, why: str):
        if self.strict:
            raise DispatchError(f"tunesearch cannot dispatch: {why}")
        self._once(key, logging.WARNING, "tunesearch: %s; falling back to dequantize-then-matmul", why)
        return None

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        """C = a · W (W: packed and scales) by the table's kernels; with a gradient for ``a`` where autograd
        records it (``input_grad``), as ``reference_matmul`` has through torch's ops."""
        if a.requires_grad and torch.is_grad_enabled():
            return _WithInputGrad.apply(a, packed, scales, self)
        return self._call(a, packed, scales)

    def _call(self, a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
        key = (a.shape, a.stride(), a.dtype, a.device, packed.shape, scales.shape)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._entry(a, packed, scales)
        launcher, M, N = entry
        if (packed.dtype is not torch.int32 or scales.dtype is not torch.float16
                or not packed.is_contiguous() or not scales.is_contiguous()
                or packed.get_device() != a.get_device() or scales.get_device() != a.get_device()):
            check_inputs(a, packed, scales, self.group_size)  # raises the precise error
        if launcher is None:
            return reference_matmul(a, packed, scales, self.group_size)
        return launcher(a, packed, scales, torch.empty((M, N), dtype=torch.float16, device=a.device))

    def _entry(self, a, packed, scales):
        """First call of a key: validate fully, plan the launches, build their launchers. With OVERLAP_PRICE
        set, a call outside a graph capture may have a plan of its own (``plan``'s ``eager``)."""
        M, N, K = check_inputs(a, packed, scales, self.group_size)
        if M == 0:  # no rows (an empty batch): C is empty, nothing to plan or launch
            return (lambda a, packed, scales, out: out), M, N
        layout = layout_of(packed, scales)
        parts = self.plan(M, N, K, a.device, layout)
        eager_parts = self.plan(M, N, K, a.device, layout, eager=True) if OVERLAP_PRICE is not None else parts
        if eager_parts == parts:
            return (self._launcher(parts, a, packed, scales, K), M, N) if parts[0][1] is not None else (None, M, N)
        captured, eager = (self._launcher(p, a, packed, scales, K) for p in (parts, eager_parts))

        def launcher(a, packed, scales, out):
            return (captured if torch.cuda.is_current_stream_capturing() else eager)(a, packed, scales, out)

        return launcher, M, N

    def _launcher(self, parts, a, packed, scales, K: int):
        """``launcher(a, packed, scales, out)`` running the plan ``parts`` [(rows, variant)]."""
        M, N = a.shape[0], scales.shape[1]
        if len(parts) == 1 and parts[0][1] is None:
            return lambda a, packed, scales, out: reference_matmul(a, packed, scales, self.group_size)
        out = torch.empty((M, N), dtype=torch.float16, device=a.device)
        if len(parts) == 1:
            return make_launcher(parts[0][1], a, packed, scales, out, self.group_size)
        spans, start = [], 0
        for rows, variant in parts:
            stop = start + rows
            spans.append((start, stop, make_launcher(variant, a[start:stop], packed, scales, out[start:stop],
                                                     self.group_size)))
            start = stop
        if LARGEST_FIRST:  # the fewest rows last: their launch reads weights the others left in L2
            spans.sort(key=lambda span: span[0] - span[1])
        overlaps = self._overlaps(parts, N, K, a.device)
        eager_too = overlaps and self._shape_table(N, K, a.device).table_us(M, tuple(r for r, _ in parts)) >= \
            EAGER_SIDE_BY_SIDE_US  # else side by side only in a capture
        largest_first = spans if LARGEST_FIRST else sorted(spans, key=lambda span: span[0] - span[1])

        def launcher(a, packed, scales, out):  # each launch writes its own rows of one output
            if CONCURRENT is True or CONCURRENT == "auto" and overlaps and (
                    eager_too or torch.cuda.is_current_stream_capturing()):
                return _run_side_by_side(largest_first, a, packed, scales, out)
            for start, stop, part in spans:
                part(a[start:stop], packed, scales, out[start:stop])
            return out

        return launcher

    def warmup(self, shapes, max_m: int = 4096) -> int:
        """Compile every variant the table can pick for ``shapes`` [(K, N), ...] and M <= max_m,
        for each of Triton's M specializations (M == 1, M % 16 == 0, other). Returns launches."""
        launches = 0
        for K, N in shapes:
            table = self.table_for(torch.device("cuda"))
            bounds = table.shapes[(N, K)].m_maxes if table and (N, K) in table.shapes else [1, 16, 64, max_m]
            ms, lo = set(), 1
            for hi in sorted(set(bounds + [max_m])):
                hi = min(hi, max_m)
                if hi < lo:
                    continue
                ms.update({lo, hi})
                sixteen = ((lo + 15) // 16) * 16
                if sixteen <= hi:
                    ms.add(sixteen)
                lo = hi + 1
            scales = torch.ones(K // self.group_size, N, dtype=torch.float16, device="cuda")
            packed = self.prepare(torch.zeros(K // 8, N, dtype=torch.int32, device="cuda"), scales)
            for m in sorted(ms):
                self(torch.zeros(m, K, dtype=torch.float16, device="cuda"), packed, scales)
                launches += 1
        torch.cuda.synchronize()
        return launches


class _WithInputGrad(torch.autograd.Function):
    """A dispatcher's call recorded by autograd: the kernels forward, ``input_grad`` backward (the weights,
    packed integers, get none)."""

    @staticmethod
    def forward(ctx, a, packed, scales, mm):
        ctx.save_for_backward(packed, scales)
        ctx.group_size = mm.group_size
        return mm._call(a, packed, scales)

    @staticmethod
    def backward(ctx, grad):
        packed, scales = ctx.saved_tensors
        return input_grad(grad, packed, scales, ctx.group_size), None, None, None


_registry: dict[str, Dispatcher] = {}


def _register_op():
    if hasattr(torch.ops, "tunesearch") and hasattr(torch.ops.tunesearch, "w4a16_mm"):
        return

    @torch.library.custom_op("tunesearch::w4a16_mm", mutates_args=())
    def w4a16_mm(a: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, table: str) -> torch.Tensor:
        return _registry[table]._call(a, packed, scales)

    @w4a16_mm.register_fake
    def _(a, packed, scales, table):
        return a.new_empty((a.shape[0], scales.shape[1]))

    # the backward as an op of its own, opaque to torch.compile's tracing as the forward is (the spec's
    # dequantize reads module-level constant tensors, which its fake tensors refuse)
    @torch.library.custom_op("tunesearch::w4a16_input_grad", mutates_args=())
    def w4a16_input_grad(grad: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor,
                         group_size: int) -> torch.Tensor:
        return input_grad(grad, packed, scales, group_size)

    @w4a16_input_grad.register_fake
    def _(grad, packed, scales, group_size):
        return grad.new_empty((grad.shape[0], scales.shape[0] * group_size), dtype=torch.float16)

    def setup_context(ctx, inputs, output):
        _, packed, scales, table = inputs
        ctx.save_for_backward(packed, scales)
        ctx.group_size = _registry[table].group_size

    def backward(ctx, grad):
        packed, scales = ctx.saved_tensors
        return torch.ops.tunesearch.w4a16_input_grad(grad, packed, scales, ctx.group_size), None, None, None

    w4a16_mm.register_autograd(backward, setup_context=setup_context)


def packaged_tables() -> dict:
    merged = None
    folder = resources.files("tunesearch") / "tables"
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".json"):
            table = read_table(item)
            merged = table if merged is None else merge_tables(merged, table)
    if merged is None:
        raise DispatchError("this tunesearch ships no dispatch tables; pass a path from `tunesearch export`")
    return merged


def load_dispatch(path: str | os.PathLike | None = None, *, group_size: int = 128,
                  strict: bool = False, split: bool = True) -> Dispatcher:
    """Load a dispatch table (None: the tables packaged with tunesearch). ``split=False``: every M in one
    launch, never two where the table says two are faster (``Dispatcher.plan``)."""
    table = packaged_tables() if path is None else read_table(path)
    source = "packaged tables" if path is None else str(path)
    mm = Dispatcher(table, group_size=group_size, strict=strict, split=split, source=source)
    _register_op()
    name = f"{source}#{len(_registry)}"
    _registry[name] = mm
    mm.op = lambda a, packed, scales: torch.ops.tunesearch.w4a16_mm(a, packed, scales, name)
    return mm
