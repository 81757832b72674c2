"""How long a split call's launches take side by side: a model of the block scheduler, for the split rule.

Each launch is CTAs that all take its wave time (its bucket time over its waves) and a share of an SM: one
over the CTAs an SM its registers are sized for (rsmma's CTAS). The largest launch runs on the stream of
highest priority, so its CTAs go first wherever one fits, and no other launch's CTA is placed while one of
its own waits for room; the others (streams of one priority) each take what room they fit, in the order they
were issued. So a first launch of several waves fills every slot until its last wave, and the others run in
the room that wave leaves and after it.

Where a CTA goes: at time 0, to the SM with the most room (the scheduler spreads a launch over idle SMs);
later, the first launch's still so, the others' to the SM with the least room that fits it: SMs free one at
a time as CTAs end, and each takes as many waiting CTAs as fit. A later launch's CTA packed more densely
than its launch runs alone (CTAs an SM alone: its CTAS where it has several waves, else its CTAs over the
SMs) takes its time times that ratio, the SM's throughput shared among more of them.

Without the clock below, on the H100 (NOTES.md rows 124-125), of the 42 plans that `OVERLAP_PRICE` changed
in four A/Bs it predicts the side of 1 of 41 (the one other its rule now keeps from being chosen): 4096^2
M=770..890's 640 tokens on CTAs of two an SM, then 128 CTAs of one an SM, which fit only the SMs the 640's
last wave leaves empty (predicted and measured slower), and 4096x12288 M=450's 384 rows in three waves, then
192 twotile CTAs of 66 rows which run 1.45 an SM alone and three an SM in the last wave's freed SMs
(measured 1.077 of the whole launch, predicted 0.88 without the packing, 1.03 with it). Held out (row 125)
it had 16 of 18 right; it missed where the later launches fill the SMs a last wave leaves idle, which lowers
the SM clock (row 125 (f)).

The clock: under the power cap, the H100's SM clock falls as more SMs are busy, and a plan replayed again
and again runs at the clock its mean power sets (a power controller acts over milliseconds, a plan takes
microseconds). So the clock is taken as 1 - CLOCK_DROP x the share of SMs holding a CTA, averaged over the
run; a launch's table time was timed at its own share alone, and side by side every CTA runs at the plan's.
CLOCK_DROP comes from nvidia-smi's clocks (row 125 (f), largest launch alone then the plan side by side, one
second each): 11008x4096 M=3150 1745 MHz at 0.727 of the SMs busy, 1560 at 0.975 (0.327);
4096x22016 M=1120 1610 at 0.869, 1530 at 0.974 (0.336). With it, of the 60 plans the A/Bs changed the
model puts 59 on their measured side of 1 (57 without), for any CLOCK_DROP from 0.25 to 0.36 (row 126).
No CTA runs faster than alone: where a plan keeps fewer SMs busy than one of its launches did alone (a
long tail on a few SMs, a slow plan anyway) its clock is not raised, so a plan never comes under its first
launch's time alone, a floor the split rule prunes its candidates with (59 of 60 so too).
"""
import functools
import heapq
import math


# the SM clock's fall, as a share of its clock with no SM busy, with every SM busy (see above)
CLOCK_DROP = 0.33


@functools.lru_cache(maxsize=4096)  # a split rule's candidate plans share their launches' grids across M
def side_by_side_us(launches: tuple[tuple[int, int, float, int], ...], num_sms: int,
                    clock_drop: float = CLOCK_DROP) -> float:
    """When the last CTA of ``launches`` ((CTAs, CTAs an SM, a CTA's time alone, CTAs an SM alone), ...), in
    priority order, ends, all issued at time 0 on ``num_sms`` SMs, each CTA at the clock of the plan's busy
    SMs rather than its launch's alone, never faster: a fixed point, since the time sets the busy share and it
    the clock."""
    end, busy = _schedule(launches, num_sms)
    if not clock_drop or len(launches) == 1:
        return end
    alone = [_busy_alone(launch, num_sms) for launch in launches]
    for _ in range(50):  # 0-11 rounds at the table's two-launch plans, 5 at the median (the cap slows it)
        clocked = tuple((ctas, per_sm, cta_us * max(1.0, (1 - clock_drop * share) / (1 - clock_drop * busy)), dense)
                        for (ctas, per_sm, cta_us, dense), share in zip(launches, alone))
        last, (end, busy) = end, _schedule(clocked, num_sms)
        if abs(end - last) <= 1e-9 * end:
            break
    return end


@functools.lru_cache(maxsize=4096)  # a launch recurs across the candidate plans of every M
def _busy_alone(launch: tuple[int, int, float, int], num_sms: int) -> float:
    """The share of SMs that ``launch`` alone keeps busy, averaged over its run."""
    return _schedule((launch,), num_sms)[1]


def _schedule(launches: tuple[tuple[int, int, float, int], ...], num_sms: int) -> tuple[float, float]:
    """When the last CTA of ``launches`` ends, each at its given time, and the share of SMs that held a CTA,
    averaged over that time."""
    unit = math.lcm(*(per_sm for _, per_sm, _, _ in launches))  # an SM's room in integer shares
    pending = [ctas for ctas, _, _, _ in launches]
    room = [unit] * num_sms
    by_room = [[] for _ in range(unit)] + [list(range(num_sms))]  # SMs by their room; stale entries skipped
    on_sm = [[0] * num_sms for _ in launches]  # each launch's CTAs running on each SM
    running = []  # a heap of (end, sm, launch)
    now = busy_sms = busy_area = 0.0
    # the first launch's waves before its last, at once: each fills every SM's room with its CTAs, which start
    # and end together, and no other launch's CTA is placed while one of the first's waits, so they run
    # alone (a launch of 688 CTAs, one an SM: 5 waves of 132 not placed one by one)
    ctas, per_sm, cta_us, _ = launches[0]
    skipped = (ctas - 1) // (per_sm * num_sms)
    if skipped:
        pending[0] -= skipped * per_sm * num_sms
        now = skipped * cta_us
        busy_area = num_sms * now

    def find(share: int, least: bool) -> int | None:
        for r in range(share, unit + 1) if least else range(unit, share - 1, -1):
            heap = by_room[r]
            while heap and room[heap[0]] != r:
                heapq.heappop(heap)
            if heap:
                return heap[0]
        return None

    while True:
        for i, (_, per_sm, cta_us, alone) in enumerate(launches):
            share = unit // per_sm
            while pending[i]:
                sm = find(share, least=i > 0 and now > 0)
                if sm is None:
                    break
                busy_sms += room[sm] == unit
                room[sm] -= share
                heapq.heappush(by_room[room[sm]], sm)
                on_sm[i][sm] += 1
                slower = max(1.0, on_sm[i][sm] / alone) if i else 1.0
                heapq.heappush(running, (now + cta_us * slower, sm, i))
                pending[i] -= 1
            if pending[i] and i == 0:  # the first's priority: the others wait behind its CTAs
                break
        if not running:
            return now, busy_area / (num_sms * now) if now else 0.0
        busy_area += busy_sms * (running[0][0] - now)
        now = running[0][0]
        while running and running[0][0] <= now + 1e-9:
            _, sm, i = heapq.heappop(running)
            room[sm] += unit // launches[i][1]
            busy_sms -= room[sm] == unit
            heapq.heappush(by_room[room[sm]], sm)
            on_sm[i][sm] -= 1
