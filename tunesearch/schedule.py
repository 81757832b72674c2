"""How long a split call's launches take side by side: a model of the block scheduler, for the split rule.

Each launch is CTAs that all take its wave time (its bucket time over its waves) and a share of an SM: one
over the CTAs an SM its registers are sized for (rsmma's CTAS). The largest launch runs on the stream of
highest priority, so its CTAs go first wherever one fits, and no other launch's CTA is placed while one of
its own waits for room; the others (streams of one priority) each take what room they fit, in the order they
were issued. A CTA goes to the SM with the most room (the scheduler spreads a launch over the SMs). So a
first launch of several waves fills every slot until its last wave, and the others run in the room that wave
leaves and after it.

It has no fitted constant. On the H100 (NOTES.md row 124) it tells apart, every one, the 25 plans that
`OVERLAP_PRICE`'s former rule (1.06 times the largest launch's time) changed: the 16 it predicts faster than
the plan they replaced ran 0.88-0.98 of its time, the one it predicts level 1.001, and the 8 it predicts
slower 1.04-1.20 (4096^2 M=770..890: 640 tokens on CTAs of two an SM, then 128 CTAs of one an SM, which fit
only the SMs the 640's last wave leaves empty). Of the seven plans of its own timed next, six ran 0.92-1.00
of the plans they replaced, as predicted, and one 1.08 where it predicted 0.92 (4096x12288 M=450: 384 rows,
then 66 on a twotile pick; not understood yet).
"""
import functools
import heapq

EPS = 1e-9  # room left by shares that sum to one SM (1/3 + 1/3 + 1/3)


@functools.lru_cache(maxsize=4096)  # a split rule's candidate plans share their launches' grids across M
def side_by_side_us(launches: tuple[tuple[int, int, float], ...], num_sms: int) -> float:
    """When the last CTA of ``launches`` ((CTAs, CTAs an SM, a CTA's time), ...), in priority order, ends,
    all issued at time 0 on ``num_sms`` SMs."""
    pending = [[ctas, 1.0 / per_sm, cta_us] for ctas, per_sm, cta_us in launches]
    room = [1.0] * num_sms
    most_room = [(-1.0, sm) for sm in range(num_sms)]  # a heap, stale entries skipped (room changed since)
    running = []  # a heap of (end, sm, share)
    now = 0.0
    while True:
        for launch in pending:
            while launch[0]:
                while -most_room[0][0] != room[most_room[0][1]]:
                    heapq.heappop(most_room)
                sm = most_room[0][1]
                if room[sm] + EPS < launch[1]:
                    break
                room[sm] -= launch[1]
                heapq.heapreplace(most_room, (-room[sm], sm))
                heapq.heappush(running, (now + launch[2], sm, launch[1]))
                launch[0] -= 1
            if launch[0] and launch is pending[0]:  # the first's priority: the others wait behind its CTAs
                break
        if not running:
            return now
        now = running[0][0]
        while running and running[0][0] <= now + EPS:
            _, sm, share = heapq.heappop(running)
            room[sm] += share
            heapq.heappush(most_room, (-room[sm], sm))
