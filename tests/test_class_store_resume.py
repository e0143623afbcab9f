"""Failover's unit: a teacher's run rebuilt from the store's checkpoint (another host's copy of the model) is the
same run, at the same step, with the same round open and every guess kept; only the browser that started the
class takes it up."""

from __future__ import annotations

import pytest

from inference.core.loader import encode_prompt
from inference.lessons.classroom import resume, run_checkpoint
from inference.lessons.classroom.store import ClassError, ClassStore
from inference.lessons.classroom.teacher import TeacherRun
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit
KEY = "the-teachers-browser-cookie"


@pytest.fixture
def class_run(bundled, tmp_path):
    store = ClassStore(str(tmp_path / "classes.sqlite3"))
    code, secret = store.create(teacher_key=KEY)
    ids = encode_prompt(bundled.tokenizer, "Once upon a time, there was a little")
    run = TeacherRun.start(
        store, code, secret, bundled.model, bundled.tokenizer, ids, 30, SamplingSettings(temperature=1.0), 0, "m"
    )
    return store, run


def test_settings_survive_the_round_trip():
    settings = SamplingSettings(temperature=0.7, top_p=0.9, top_k=5, dry_multiplier=0.8)
    assert run_checkpoint.settings_from(run_checkpoint.settings_dict(settings)) == settings
    assert run_checkpoint.settings_dict(SamplingSettings()) == {}


def test_a_run_taken_up_elsewhere_goes_on_from_the_same_step_with_every_guess(bundled, class_run):
    store, run = class_run
    for _ in range(3):
        run.step()
    run.change_settings(SamplingSettings(temperature=0.8, top_p=0.9))
    run.step()
    run.same_step_another_seed()  # seed 1 from here on
    step = run.open_guessing()
    members = [store.join(run.code) for _ in range(5)]
    for i, member in enumerate(members):
        store.answer(run.code, member, step, run.guessed_choices[i % 2]["id"])

    taken = resume.take_up(store, KEY, bundled.model, bundled.tokenizer, "m")  # as if on another host
    assert taken is not run and taken.code == run.code
    assert taken.trace.generated_ids == run.trace.generated_ids and len(taken.trace.generated_ids) == 4
    assert taken.trace.seed == run.trace.seed == 1
    assert (taken.settings, taken.guess_step, taken.run_id) == (run.settings, run.guess_step, run.run_id)
    assert taken.answers_so_far() == 5
    # The next draw is the one the dead host would have made, and its reveal counts the five answers.
    record = taken.step()
    assert record.token_id == run.trace.step(run.settings).token_id
    assert store.info(run.code).state["reveal"]["answers"] == 5


def test_only_the_browser_that_started_the_class_takes_it_up(bundled, class_run):
    store, run = class_run
    assert resume.take_up(store, "a-students-cookie", bundled.model, bundled.tokenizer, "m") is None
    assert resume.take_up(store, None, bundled.model, bundled.tokenizer, "m") is None
    with pytest.raises(ClassError, match="on m: pick m in the sidebar"):
        resume.take_up(store, KEY, bundled.model, bundled.tokenizer, "another model")
