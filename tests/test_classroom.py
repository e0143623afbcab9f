"""Class mode's lesson: the choices (our softmax), the reveal wherever the draw ranks, and failover (a run rebuilt
from the store's checkpoint is the same run with every guess, taken up only by the browser that started it)."""

from types import SimpleNamespace

import pytest
import torch

from inference.core.loader import encode_prompt
from inference.core.run import new_trace
from inference.lessons.classroom import teacher as session
from inference.lessons.classroom.figures import reveal_chart
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassError, ClassStore, Tally
from inference.lessons.classroom.teacher import TeacherRun
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit
KEY = "the-teachers-browser-cookie"
PROMPT = "Once upon a time, there was a little"


@pytest.fixture
def class_run(bundled, tmp_path):
    store = ClassStore(tmp_path / "classes.sqlite3")
    code, secret = store.create(teacher_key=KEY)
    ids = encode_prompt(bundled.tokenizer, PROMPT)
    settings = SamplingSettings(temperature=1.0)
    return store, TeacherRun.start(store, code, secret, bundled.model, bundled.tokenizer, ids, 30, settings, 0, "m")


def test_reveal_puts_answers_beside_the_models_probabilities_and_the_draw(bundled):
    ids = bundled.tokenizer.encode(PROMPT)
    trace = new_trace(bundled.model, bundled.tokenizer, ids, 4, seed=3)
    settings = SamplingSettings(temperature=1.0)
    choices = session.next_choices(trace.peek(), settings, trace.seen_now(), bundled.tokenizer)
    top = torch.topk(trace.peek().double().softmax(-1), 10)
    assert [c["id"] for c in choices[:10]] == top.indices.tolist()
    assert [c["final"] for c in choices[:10]] == pytest.approx(top.values.tolist(), abs=1e-9)
    assert sorted(o["id"] for o in session.options_for_guessing(choices, 1)) == sorted(top.indices.tolist())

    tally = Tally("s", {choices[0]["id"]: 3, SOMETHING_ELSE: 1}, {choices[0]["id"]: [0.5]}, {}, 4)
    record = trace.step(settings)
    rv = session.reveal(tally, choices, record)
    assert rv["rows"][0]["answers"] == 3 and rv["rows"][0]["share"] == 0.75 and rv["rows"][0]["stated_mean"] == 0.5
    assert rv["chosen_id"] == record.token_id and rv["chosen_rank"] == record.rank + 1


def test_a_draw_far_down_the_list_is_a_bar_of_the_reveal_chart():
    choices = [{"id": 100 + i, "label": f"t{i}", "raw": 0.5 / (i + 1), "final": 0.5 / (i + 1)} for i in range(15)]
    drawn = SimpleNamespace(token_id=9_999, rank=77, prob=0.00018, u=0.97, index=0, seed=0, token_text=" thing")
    rv = session.reveal(Tally("s", {100: 2}, {}, {}, 2), choices, drawn)
    assert rv["rows"][-1]["id"] == 9_999 and rv["rows"][-1]["model_prob"] == pytest.approx(0.00018)
    marked = [name for name in reveal_chart(rv).data[1].y if name.startswith("➜")]
    assert len(marked) == 1 and "thing" in marked[0] and "78" in marked[0]


def test_the_choices_caption_is_exact_only_when_the_teacher_has_the_whole_distribution():
    """An engine's top N (-inf for the rest, log-probabilities for the returned) is measured and said so."""
    whole = session.distribution_of(torch.tensor([2.0, 1.0, 0.5, -3.0]))
    assert whole == {"returned": 4, "vocabulary": 4, "mass": 1.0}
    assert session.choices_caption(whole, teacher=True)[0] == "exact"
    top_two = session.distribution_of(torch.log(torch.tensor([0.6, 0.3, 0.0, 0.0])).float())
    assert top_two["returned"] == 2 and top_two["mass"] == pytest.approx(0.9)
    assert session.choices_caption(top_two, teacher=False)[0] == "measured"
    assert session.choices_caption(None, teacher=True)[0] == "exact"  # a state published before this field


def test_a_run_taken_up_elsewhere_goes_on_from_the_same_step_with_every_guess(bundled, class_run):
    store, run = class_run
    record = run.step()  # a draw without opened guessing still has its reveal
    assert store.info(run.code).state["reveal"]["chosen_id"] == record.token_id
    for _ in range(2):
        run.step()
    run.change_settings(SamplingSettings(temperature=0.8, top_p=0.9))
    run.step()
    run.same_step_another_seed()  # seed 1 from here on
    step = run.open_guessing()
    for i in range(5):
        store.answer(run.code, store.join(run.code), step, run.guessed_choices[i % 2]["id"])

    taken = TeacherRun.take_up(store, KEY, bundled.model, bundled.tokenizer, "m")  # as if on another host
    assert taken is not run and taken.code == run.code
    assert taken.trace.generated_ids == run.trace.generated_ids and len(taken.trace.generated_ids) == 4
    assert taken.trace.seed == run.trace.seed == 1
    assert (taken.settings, taken.guess_step, taken.run_id) == (run.settings, run.guess_step, run.run_id)
    assert taken.answers_so_far() == 5
    # The next draw is the one the dead host would have made, and its reveal counts the five answers.
    assert taken.step().token_id == run.trace.step(run.settings).token_id
    assert store.info(run.code).state["reveal"]["answers"] == 5


def test_only_the_browser_that_started_the_class_takes_it_up(bundled, class_run):
    store, _ = class_run
    assert TeacherRun.take_up(store, "a-students-cookie", bundled.model, bundled.tokenizer, "m") is None
    assert TeacherRun.take_up(store, None, bundled.model, bundled.tokenizer, "m") is None
    with pytest.raises(ClassError, match="pick m in the sidebar"):
        TeacherRun.take_up(store, KEY, bundled.model, bundled.tokenizer, "another model")
