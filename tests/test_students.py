"""The pure parts of `python -m inference.bench.students`: the human-pace click schedule, one student's loop on a fake
clock with a fake step, and the threshold search on a made-up latency curve. Nothing here is timed."""

import pytest

from inference.bench.students import click_schedule, largest_within, run_student

pytestmark = pytest.mark.unit


def test_click_schedule_is_seeded_and_clicks_every_period_from_a_phase_within_the_first_period():
    schedule = click_schedule(50, 4, period_s=2.0, seed=3)
    assert schedule == click_schedule(50, 4, period_s=2.0, seed=3) != click_schedule(50, 4, period_s=2.0, seed=4)
    assert all(0 <= t[0] < 2.0 and t == pytest.approx([t[0] + 2.0 * k for k in range(4)]) for t in schedule)
    assert len({times[0] for times in schedule}) == 50  # random phases, not all at once
    assert click_schedule(60, 4, 2.0, 3)[:50] == schedule  # adding students keeps the first ones' phases


def test_a_student_waits_for_the_planned_click_and_clicks_at_once_after_a_step_that_ran_late():
    """Clicks at 0.2 and 2.2 as planned; the second Step takes 3 s, so the third click is at 5.2, not 4.2."""
    clock, durations = [0.0], iter([0.5, 3.0, 0.1])

    def advance(seconds: float) -> None:
        assert seconds > 0
        clock[0] += seconds

    spans = run_student(lambda: advance(next(durations)), [0.2, 2.2, 4.2], lambda: clock[0], advance)
    assert spans == pytest.approx([(0.2, 0.7), (2.2, 5.2), (5.2, 5.3)])


def test_the_search_doubles_then_bisects_to_the_largest_number_within_the_limit():
    """p95 = 30 ms per student: 33 students are within 1 s, 34 are not; one over: 0; never over: a bound."""
    search = largest_within(lambda n: 0.03 * n, limit_s=1.0, max_students=512, precision=0)
    assert search.answer == 33 and not search.capped
    assert {1, 2, 4, 8, 16, 32, 64} <= set(search.measured)
    assert all(32 < n < 64 for n in set(search.measured) - {1, 2, 4, 8, 16, 32, 64})  # bisection in the bracket
    rough = largest_within(lambda n: 0.03 * n, limit_s=1.0, precision=0.1)  # stops once the bracket is 3 wide
    assert 30 <= rough.answer <= 33 and len(rough.measured) < len(search.measured)
    over = largest_within(lambda n: 2.0, limit_s=1.0)
    assert over.answer == 0 and list(over.measured) == [1]
    never = largest_within(lambda n: 0.1, limit_s=1.0, max_students=100)
    assert never.answer == 64 and never.capped and sorted(never.measured) == [1, 2, 4, 8, 16, 32, 64]
