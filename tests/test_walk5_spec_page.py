"""#46 item 14 on the Speculative page: a new γ keeps the run; after Play the page opens a round that drafted."""

import os

import pytest

from tests.conftest import open_app_page

pytestmark = pytest.mark.page

PAGE = "app_pages/speculative.py"
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def test_changing_gamma_keeps_the_run_and_the_next_round_drafts_the_new_gamma():
    at = open_app_page(PAGE, {"t": "0", "g": "2", "max": "40"}, timeout=300)
    at.button(key="spec_step").click().run()
    at.button(key="spec_step").click().run()
    before = at.session_state["spec_run"]
    assert len(before.rounds) == 3  # the round drafted on page load (#46 item 11), then two Steps
    at.slider(key="spec_gamma").set_value(5).run()
    assert not at.exception
    run = at.session_state["spec_run"]
    assert run is before and len(run.rounds) == 3
    at.button(key="spec_step").click().run()
    assert [r.gamma for r in at.session_state["spec_run"].rounds] == [2, 2, 2, 5]


def test_after_play_the_opened_round_drafted_something():
    at = open_app_page(
        PAGE, {"t": "0", "g": "4", "max": "21", "prompt": "Tom and his dog went to the park."}, timeout=300
    )
    at.button(key="spec_play").click().run()
    assert not at.exception
    run = at.session_state["spec_run"]
    assert run.finished
    text = " ".join(m.value for m in at.markdown)
    assert "Drafted at most 0 token" not in " ".join(i.value for i in at.info)
    shown = at.slider(key=f"spec_round_{len(run.rounds)}").value
    assert run.rounds[shown].drafted > 0, text[:200]
