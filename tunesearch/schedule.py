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

It has no fitted constant. On the H100 (NOTES.md rows 124-125), of the 42 plans that `OVERLAP_PRICE` changed
in four A/Bs it predicts the side of 1 of 41 (the one other its rule now keeps from being chosen): 4096^2
M=770..890's 640 tokens on CTAs of two an SM, then 128 CTAs of one an SM, which fit only the SMs the 640's
last wave leaves empty (predicted and measured slower), and 4096x12288 M=450's 384 rows in three waves, then
192 twotile CTAs of 66 rows which run 1.45 an SM alone and three an SM in the last wave's freed SMs
(measured 1.077 of the whole launch, predicted 0.88 without the packing, 1.03 with it). Held out (row 125)
it had 16 of 18 right; it misses where the largest launch has several waves of two CTAs an SM, whose partly
filled last wave runs shorter than a full one (the model: as long), so the later launches get less room.
"""
import functools
import heapq
import math


@functools.lru_cache(maxsize=4096)  # a split rule's candidate plans share their launches' grids across M
def side_by_side_us(launches: tuple[tuple[int, int, float, int], ...], num_sms: int) -> float:
    """When the last CTA of ``launches`` ((CTAs, CTAs an SM, a CTA's time, CTAs an SM alone), ...), in
    priority order, ends, all issued at time 0 on ``num_sms`` SMs."""
    unit = math.lcm(*(per_sm for _, per_sm, _, _ in launches))  # an SM's room in integer shares
    pending = [ctas for ctas, _, _, _ in launches]
    room = [unit] * num_sms
    by_room = [[] for _ in range(unit)] + [list(range(num_sms))]  # SMs by their room; stale entries skipped
    on_sm = [[0] * num_sms for _ in launches]  # each launch's CTAs running on each SM
    running = []  # a heap of (end, sm, launch)
    now = 0.0

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
                room[sm] -= share
                heapq.heappush(by_room[room[sm]], sm)
                on_sm[i][sm] += 1
                slower = max(1.0, on_sm[i][sm] / alone) if i else 1.0
                heapq.heappush(running, (now + cta_us * slower, sm, i))
                pending[i] -= 1
            if pending[i] and i == 0:  # the first's priority: the others wait behind its CTAs
                break
        if not running:
            return now
        now = running[0][0]
        while running and running[0][0] <= now + 1e-9:
            _, sm, i = heapq.heappop(running)
            room[sm] += unit // launches[i][1]
            heapq.heappush(by_room[room[sm]], sm)
            on_sm[i][sm] -= 1
