"""The Quantization page's first screen and background measurement (issues #45/#46): the bytes per width come from
the model's own parameter count, the sentence from that table, and the background measurement reports its progress,
honours a Cancel raised from it, and shows the user's prompt rather than the chat template."""

import pytest

from inference.core.loader import encode_prompt
from inference.lessons.quantization import experiments as qc
from inference.lessons.quantization import first_screen

pytestmark = pytest.mark.unit


def test_bytes_per_width_are_the_parameter_count_times_the_width(bundled):
    count = sum(p.numel() for p in bundled.model.parameters())
    frame = first_screen.bytes_table(bundled.model, bundled.info.name)
    assert frame["stored as"].tolist() == list(first_screen.WIDTHS)  # no GGUF row for a model trained here
    assert frame["weight bytes"].tolist() == [count * 4, count * 2, count, round(count / 2)]
    assert frame["vs float32"].tolist() == pytest.approx([1, 0.5, 0.25, 0.125])
    sentence = first_screen.bytes_sentence(frame, bundled.info.name, count)
    assert f"{count / 1e6:,.1f} M parameters" in sentence and f"{count * 4 / 1e6:,.0f} MB in float32" in sentence
    assert "8× fewer bytes" in sentence and "wheel" not in sentence


def test_the_background_measurement_reports_progress_and_shows_the_users_prompt(bundled):
    ids = encode_prompt(bundled.tokenizer, "Once upon a time", False)
    seen = []
    comparison = qc.measure(
        bundled.model, bundled.tokenizer, ids, 6, lambda d, t, w: seen.append((d, t, w)), shown_prompt="Hi"
    )
    assert comparison.prompt_text == "Hi" and list(comparison.results) == list(qc.PRECISIONS)
    assert seen[0] == (0, len(qc.PRECISIONS), "Making the float32 copy")
    assert any(w.startswith(f"Timing round {qc.SPEED_ROUNDS} of") for _, _, w in seen)
    assert seen[-1][2] == "Scoring every precision against float32"


def test_a_cancel_raised_by_progress_stops_the_measurement(bundled):
    class Stop(Exception):
        pass

    def cancel_at_timing(done, total, what):
        if what.startswith("Timing"):
            raise Stop

    ids = encode_prompt(bundled.tokenizer, "Once upon a time", False)
    with pytest.raises(Stop):
        qc.measure(bundled.model, bundled.tokenizer, ids, 6, cancel_at_timing)
