"""The block scheduler model the split rule prices side-by-side plans with (``tunesearch.schedule``): where
CTAs go and when they end at a fixed clock (``placed``), then the clock's fall with the SMs busy."""
import functools

import pytest

from tunesearch.schedule import CLOCK_DROP, side_by_side_us

SMS = 132
placed = functools.partial(side_by_side_us, clock_drop=0.0)  # the schedule alone, every CTA at its own time


def test_one_launch_takes_its_waves():
    assert placed(((100, 1, 10.0, 1),), SMS) == 10.0  # one wave
    assert placed(((264, 1, 10.0, 1),), SMS) == 20.0  # two full waves, one CTA an SM
    assert placed(((264, 2, 10.0, 2),), SMS) == 10.0  # one wave at two CTAs an SM
    assert placed(((265, 2, 10.0, 2),), SMS) == 20.0  # one CTA past it: a second wave


def test_a_later_launch_that_fits_the_last_waves_idle_sms_ends_within_it():
    # 200 CTAs, one an SM: the second wave's 68 leave 64 SMs for 64 CTAs of 5 us
    assert placed(((200, 1, 10.0, 1), (64, 1, 5.0, 1)), SMS) == 20.0
    # 65 of them: the last one waits for a free SM (at 15 us, the first of the 64 to end)
    assert placed(((200, 1, 10.0, 1), (65, 1, 5.0, 1)), SMS) == 20.0
    # 300 of them: the 64 idle SMs run two rounds (128) in the last wave, then 172 on all SMs take two more
    assert placed(((200, 1, 10.0, 1), (300, 1, 5.0, 1)), SMS) == pytest.approx(30.0)


def test_the_largest_launch_keeps_every_slot_until_its_last_wave():
    # a small CTA of a later launch runs in the room the first launch's last wave leaves, not before
    assert placed(((395, 1, 10.0, 1), (1, 4, 1.0, 4)), SMS) == 30.0
    assert placed(((396, 1, 10.0, 1), (1, 4, 1.0, 4)), SMS) == 31.0  # a full last wave: after it
    # the later launches share one priority: a CTA that fits runs though one issued before it waits (the
    # one half-free SM takes the quarter-SM CTA at once, the whole-SM one at 10 us)
    assert placed(((263, 2, 10.0, 2), (1, 1, 10.0, 1), (1, 4, 15.0, 4)), SMS) == 20.0


def test_ctas_of_one_an_sm_fit_only_the_sms_the_last_wave_leaves_empty():
    # 4096^2 M=800 as 640 + 160 (NOTES.md row 123): 320 CTAs two an SM, then 128 one an SM. The last wave's 56
    # spread over 56 SMs, so the 128 get 76 SMs at first and the other 52 only when that wave ends: the
    # serial sum (20 + 15), where an even share of the idle slots would have predicted the first's 20
    assert placed(((320, 2, 10.0, 2), (128, 1, 15.0, 1)), SMS) == 35.0
    # the same 128 CTAs at two an SM (and timed so) fit beside the last wave's 56 (208 slots): within it
    assert placed(((320, 2, 10.0, 2), (128, 2, 15.0, 2)), SMS) == 25.0


def test_a_later_launch_packed_into_freed_sms_runs_slower_than_spread_alone():
    # 4096x12288 M=450 as 384 + 66 (NOTES.md row 125): 576 CTAs two an SM, three waves of 22.2 us, the last of
    # 48; then 192 twotile CTAs of three an SM, timed alone at 24.6 us spread two an SM at most. The 48 SMs
    # the last wave holds take one each; SMs freed later fill three deep, and the 144 CTAs so packed run 1.5x
    # longer: 44.4 + 36.9 us, where spread two an SM they would have ended at 44.4 + 24.6 (ran 84.6, whole
    # 77.8; the plan 1.077x the whole launch's time)
    assert placed(((576, 2, 22.2, 2), (192, 3, 24.6, 2)), SMS) == pytest.approx(44.4 + 36.9)
    assert placed(((576, 2, 22.2, 2), (192, 3, 24.6, 3)), SMS) == pytest.approx(44.4 + 24.6)


def test_launches_issued_together_spread_over_idle_sms():
    # at time 0 nothing has freed: 131 SMs take one CTA each of the later launch (timed one an SM), not three
    # on 44 of them (30 us); the one left shares an SM two deep, at twice its time
    assert placed(((1, 1, 1.0, 1), (132, 3, 10.0, 1)), SMS) == 20.0
    assert placed(((1, 1, 1.0, 1), (131, 3, 10.0, 1)), SMS) == 10.0


def test_never_under_the_longest_launch_alone_nor_over_the_serial_sum():
    import random

    rng = random.Random(0)
    for _ in range(200):
        launches = tuple((rng.randint(1, 600), per_sm, rng.uniform(1, 50), per_sm)
                         for per_sm in rng.choices((1, 2, 3, 4), k=rng.randint(1, 3)))
        alone = [placed((launch,), SMS) for launch in launches]
        together = placed(launches, SMS)
        assert max(alone) - 1e-9 <= together <= sum(alone) + 1e-9, launches


def test_never_under_the_longest_launch_alone_however_densely_timed():
    import random

    rng = random.Random(1)
    for _ in range(200):
        launches = tuple((rng.randint(1, 600), per_sm, rng.uniform(1, 50), rng.randint(1, per_sm))
                         for per_sm in rng.choices((1, 2, 3, 4), k=rng.randint(2, 3)))
        alone = [placed(((c, p, us, p),), SMS) for c, p, us, _ in launches]
        assert placed(launches, SMS) >= max(alone) - 1e-9, launches


def test_one_launch_alone_keeps_its_time_at_any_clock():
    import random

    rng = random.Random(2)
    for _ in range(100):
        per_sm = rng.choice((1, 2, 3, 4))
        launch = ((rng.randint(1, 600), per_sm, rng.uniform(1, 50), per_sm),)
        assert side_by_side_us(launch, SMS) == placed(launch, SMS)


def test_launches_that_each_keep_every_sm_busy_keep_their_times():
    # one after the other, each on all 132 SMs alone and together: the clock is the same throughout
    assert side_by_side_us(((264, 1, 10.0, 1), (132, 1, 5.0, 1)), SMS) == pytest.approx(25.0)


def test_two_launches_of_half_the_sms_side_by_side_run_at_the_clock_of_all():
    # each alone holds 66 SMs (half busy), together all 132: every CTA takes (1 - k/2) / (1 - k) as long
    k = CLOCK_DROP
    together = ((66, 1, 10.0, 1), (66, 1, 10.0, 1))
    assert placed(together, SMS) == 10.0
    assert side_by_side_us(together, SMS) == pytest.approx(10.0 * (1 - k / 2) / (1 - k))


def test_filling_the_sms_a_last_wave_leaves_idle_slows_the_largest_launch():
    # 11008x4096 M=3150 in kind (NOTES.md row 125 (f)): 288 CTAs one an SM in waves of 132, 132 and 24
    # (0.727 of the SMs busy alone), then 108 CTAs one an SM (0.818 alone) in the last wave's 108 idle SMs.
    # At a fixed clock they end within it; side by side the SMs are busier, the clock lower, every CTA
    # slower. The fixed point, by hand: the largest's CTAs take s1 = (1 - 0.727k) / (1 - kB), the others'
    # s2 = (1 - 0.818k) / (1 - kB) < s1, so the plan ends with the largest's last wave at 30 s1, and the busy
    # share B is (20 s1 * 132 + 10 s1 * 24 + 10 s2 * 108) / (30 s1 * 132)
    k = CLOCK_DROP
    together = ((288, 1, 10.0, 1), (108, 1, 10.0, 1))
    assert placed(together, SMS) == 30.0
    ratio = (1 - k * 108 / 132) / (1 - k * 288 / 396)  # s2 / s1, whatever B is
    busy = (2880 + 1080 * ratio) / 3960
    assert side_by_side_us(together, SMS) == pytest.approx(30 * (1 - k * 288 / 396) / (1 - k * busy))
    assert side_by_side_us(together, SMS, clock_drop=0.0) == 30.0


def test_the_clock_never_brings_a_plan_under_its_longest_launch_alone():
    # no CTA runs faster than alone (the clock is not raised where a plan keeps fewer SMs busy than a launch
    # did alone), so the split rule may prune a plan whose first launch alone already costs too much
    import random

    rng = random.Random(3)
    for _ in range(300):
        launches = tuple((rng.randint(1, 600), per_sm, rng.uniform(1, 50), rng.randint(1, per_sm))
                         for per_sm in rng.choices((1, 2, 3, 4), k=rng.randint(2, 3)))
        alone = [side_by_side_us(((c, p, us, p),), SMS) for c, p, us, _ in launches]
        assert side_by_side_us(launches, SMS) >= max(alone) - 1e-9, launches
