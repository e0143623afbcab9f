"""#46 item 11 on the Speculative page: a session's first run opens with one round drafted and checked, without a
click; a shared link replays its own rounds instead, and Reset or a new prompt starts an empty run. The presenter
text shows the prompt's last tokens so that round stays on the first screen."""

import os
from types import SimpleNamespace

import pytest

from app_pages.shared.stepper import Stepper
from inference.lessons.speculative import figures as spec_fig
from tests.conftest import open_app_page

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


@pytest.mark.unit
def test_only_a_sessions_first_empty_run_opens_with_a_round():
    stepper = Stepper("spec", "spec_run", lambda run: len(run.rounds))
    state, empty = {}, SimpleNamespace(rounds=[])
    assert stepper.opens_with_a_step(empty, state) and state["spec_opened"]
    assert not stepper.opens_with_a_step(SimpleNamespace(rounds=[]), state)  # Reset: starts empty
    assert not stepper.opens_with_a_step(SimpleNamespace(rounds=[object()]), {})
    assert not stepper.opens_with_a_step(empty, {"spec_steps_in_url": 3})  # a link replays its 3
    assert not stepper.opens_with_a_step(None, {})


@pytest.mark.unit
def test_the_presenter_text_counts_the_prompt_tokens_it_leaves_out(bundled):
    ids = bundled.tokenizer.encode("Once upon a time there was a little cat.")
    shown = spec_fig.text_html(bundled.tokenizer, ids, [], prompt_tail=4)
    assert f"… {len(ids) - 4} earlier prompt tokens" in shown and shown.count("prompt token ") == 4
    assert "earlier prompt" not in spec_fig.text_html(bundled.tokenizer, ids, [])
    assert "earlier prompt" not in spec_fig.text_html(bundled.tokenizer, ids[:3], [], prompt_tail=4)


@pytest.mark.page
def test_the_page_opens_with_one_round_and_its_opened_view():
    at = open_app_page("app_pages/speculative.py", None, timeout=300)
    assert not at.exception
    run = at.session_state["spec_run"]
    assert len(run.rounds) == 1 and run.rounds[0].new_tokens
    assert any(s.value == "One round, opened up" for s in at.subheader)
    at.button(key="spec_reset").click().run()
    assert len(at.session_state["spec_run"].rounds) == 0  # Reset: an empty run, Step drafts its first round
