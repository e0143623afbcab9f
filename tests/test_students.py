"""The pure parts of `python -m inference.bench.students`: the human-pace click schedule, one student's loop on
a fake clock with a fake step, and the threshold search on a made-up latency curve. Nothing here is timed."""

import pytest

from inference.bench.students import click_schedule, largest_within, run_student

pytestmark = pytest.mark.unit


def test_click_schedule_is_seeded_and_clicks_every_period_from_a_phase_within_the_first_period():
    """Each student: phase in [0, period), then every period; the same seed gives the same schedule."""
    schedule = click_schedule(50, 4, period_s=2.0, seed=3)
    assert schedule == click_schedule(50, 4, period_s=2.0, seed=3)
    assert schedule != click_schedule(50, 4, period_s=2.0, seed=4)
    for times in schedule:
        assert 0 <= times[0] < 2.0
        assert times == pytest.approx([times[0] + 2.0 * k for k in range(4)])
    assert len({times[0] for times in schedule}) == 50  # random phases, not all at once
    assert click_schedule(60, 4, 2.0, 3)[:50] == schedule  # adding students keeps the first ones' phases


class FakeTime:
    """A clock that moves only when the student sleeps or a fake step runs."""

    def __init__(self):
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds


def test_a_student_waits_for_the_planned_click_and_clicks_at_once_after_a_step_that_ran_late():
    """Clicks at 0.2 and 2.2 as planned; the second Step takes 3 s, so the third click is at 5.2, not 4.2."""
    fake = FakeTime()
    durations = iter([0.5, 3.0, 0.1])

    def step():
        fake.now += next(durations)

    spans = run_student(step, [0.2, 2.2, 4.2], fake.clock, fake.sleep)
    assert spans == pytest.approx([(0.2, 0.7), (2.2, 5.2), (5.2, 5.3)])
    assert [end - click for click, end in spans] == pytest.approx([0.5, 3.0, 0.1])  # latency: click to result


def test_the_search_doubles_then_bisects_to_the_largest_number_within_the_limit():
    """p95 = 30 ms per student: 33 students are within 1 s, 34 are not."""
    search = largest_within(lambda n: 0.03 * n, limit_s=1.0, max_students=512, precision=0)
    assert search.answer == 33 and not search.capped
    assert {1, 2, 4, 8, 16, 32, 64} <= set(search.measured)
    assert all(32 < n < 64 for n in set(search.measured) - {1, 2, 4, 8, 16, 32, 64})  # bisection in the bracket
    assert all(search.measured[n] <= 1.0 for n in search.measured if n <= 33)
    assert all(search.measured[n] > 1.0 for n in search.measured if n > 33)
    rough = largest_within(lambda n: 0.03 * n, limit_s=1.0, precision=0.1)  # stops once the bracket is 3 wide
    assert 30 <= rough.answer <= 33 and len(rough.measured) < len(search.measured)


def test_the_search_answers_zero_when_one_student_is_over_and_a_bound_when_never_over():
    over = largest_within(lambda n: 2.0, limit_s=1.0)
    assert over.answer == 0 and list(over.measured) == [1]
    never = largest_within(lambda n: 0.1, limit_s=1.0, max_students=100)
    assert never.answer == 64 and never.capped and sorted(never.measured) == [1, 2, 4, 8, 16, 32, 64]
