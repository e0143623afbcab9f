"""The bench's speculative figures are timed on the app's torch thread count (the Speculative page's), and the
process's own thread count comes back after, also when the timing fails."""

import pytest
import torch

from inference.core.limits import Limits
from inference.lessons.speculative import timing

pytestmark = pytest.mark.unit


@pytest.fixture
def threads_seen(monkeypatch):
    """The torch thread count each `benchmark` call (the bundled target) and `pair_benchmark` call (the MoE target) ran
    on (the timing itself replaced: seconds, not minutes)."""
    seen = []
    for name in ("benchmark", "pair_benchmark"):
        monkeypatch.setattr(timing, name, lambda *args, **kwargs: seen.append(torch.get_num_threads()) or {})
    return seen


@pytest.fixture
def other_threads():
    """The process on a thread count the app does not use, restored after the test."""
    before = torch.get_num_threads()
    torch.set_num_threads(Limits.from_env().torch_threads + 1)
    yield torch.get_num_threads()
    torch.set_num_threads(before)


def test_speculative_figures_run_on_the_apps_threads_and_the_process_keeps_its_own(
    bundled, threads_seen, other_threads
):
    figures = timing.bundled_benchmark(bundled.model, bundled.tokenizer, [1, 2, 3])
    app_threads = Limits.from_env().torch_threads
    assert threads_seen == [app_threads, app_threads] and figures == {"spec_torch_threads": app_threads}
    assert torch.get_num_threads() == other_threads


def test_a_failing_timing_still_gives_the_process_its_threads_back(bundled, monkeypatch, other_threads):
    def fails(*args, **kwargs):
        raise RuntimeError("timing failed")

    monkeypatch.setattr(timing, "benchmark", fails)
    with pytest.raises(RuntimeError, match="timing failed"):
        timing.bundled_benchmark(bundled.model, bundled.tokenizer, [1, 2, 3], threads=1)
    assert torch.get_num_threads() == other_threads
