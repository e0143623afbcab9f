"""Issue #46 item 8: the class's reveal shows the drawn token wherever it ranks (rank 78 included), the intro
names the button by its label, and a draw made without opened guessing still gets its reveal sentence."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from inference.core.paths import PROJECT_ROOT
from inference.lessons.classroom import session
from inference.lessons.classroom.figures import reveal_chart
from inference.lessons.classroom.store import ClassStore, Tally
from inference.lessons.classroom.teacher import TeacherRun
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit


def choices(n: int = 15) -> list[dict]:
    return [{"id": 100 + i, "label": f"t{i}", "raw": 0.5 / (i + 1), "final": 0.5 / (i + 1)} for i in range(n)]


def test_a_draw_far_down_the_list_is_a_bar_of_the_reveal_chart():
    drawn = SimpleNamespace(token_id=9_999, rank=77, prob=0.00018, u=0.97, index=0, seed=0, token_text=" thing")
    tally = Tally("s", {100: 2}, {}, {}, 2)
    rv = session.reveal(tally, choices(), drawn)
    assert [r["id"] for r in rv["rows"]][-1] == 9_999 and rv["rows"][-1]["model_prob"] == pytest.approx(0.00018)
    names = list(reveal_chart(rv).data[1].y)
    marked = [name for name in names if name.startswith("➜")]
    assert len(marked) == 1 and "thing" in marked[0] and "78" in marked[0], names
    assert "rank 78" in session.reveal_sentence(rv)


def test_the_intro_names_the_draw_button_by_its_label():
    assert session.STEP_BUTTON == "Draw and reveal"
    assert f"**{session.STEP_BUTTON}**" in session.INTRO and "**Step**" not in session.INTRO
    page = Path(PROJECT_ROOT, "app_pages", "class.py").read_text()
    assert "session.STEP_BUTTON" in page and "session.INTRO" in page  # the page shows these, not its own words


def test_a_draw_without_opened_guessing_still_has_its_reveal_sentence(bundled, tmp_path):
    store = ClassStore(tmp_path / "classes.sqlite3")
    code, secret = store.create()
    ids = bundled.tokenizer.encode("Once upon a time, there was a little")
    run = TeacherRun.start(
        store, code, secret, bundled.model, bundled.tokenizer, ids, 4, SamplingSettings(temperature=1.0), 0, "toy"
    )
    record = run.step()
    rv = store.info(code).state["reveal"]
    assert rv is not None and rv["chosen_id"] == record.token_id
    sentence = session.reveal_sentence(rv)
    assert f"rank {record.rank + 1}" in sentence and "guessing was not open" in sentence.lower(), sentence
