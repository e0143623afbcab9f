"""Class mode's codes, cap and reveal. The store's rules (answers counted exactly under a rush, the teacher's
controls checked server side, expiry, names) run on SQLite and PostgreSQL in tests/test_class_store.py."""

import pytest
import torch

from inference.core.run import new_trace
from inference.lessons.classroom import session
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassError, ClassStore, Tally, normalise_code
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit


@pytest.fixture
def store(tmp_path):
    return ClassStore(tmp_path / "classes.sqlite3", max_members=40)


def test_cap_and_bad_codes(tmp_path):
    store = ClassStore(tmp_path / "c.sqlite3", max_members=2)
    code, _ = store.create()
    store.join(code)
    store.join(code.lower())  # codes are read case-insensitively
    with pytest.raises(ClassError, match="is full \\(2 students\\)"):
        store.join(code)
    with pytest.raises(ClassError, match="no class with the code ZZZ"):
        store.join("zzz")
    assert normalise_code(" ab-c d ") == "ABCD"


def test_codes_are_random_and_unambiguous(store):
    codes = {store.create()[0] for _ in range(50)}
    assert len(codes) == 50
    assert all(len(c) == 8 and not set(c) & set("01OIL") for c in codes)


def test_reveal_puts_answers_beside_the_models_probabilities_and_the_draw(bundled):
    loaded = bundled
    ids = loaded.tokenizer.encode("Once upon a time, there was a little")
    trace = new_trace(loaded.model, loaded.tokenizer, ids, 4, seed=3)
    settings = SamplingSettings(temperature=1.0)
    choices = session.next_choices(trace.peek(), settings, trace.seen_now(), loaded.tokenizer)
    probs = trace.peek().double().softmax(-1)
    top = torch.topk(probs, 10)
    assert [c["id"] for c in choices[:10]] == top.indices.tolist()
    assert [c["final"] for c in choices[:10]] == pytest.approx(top.values.tolist(), abs=1e-9)
    offered = session.options_for_guessing(choices, 1)
    assert sorted(o["id"] for o in offered) == sorted(top.indices.tolist())

    tally = Tally("s", {choices[0]["id"]: 3, SOMETHING_ELSE: 1}, {choices[0]["id"]: [0.5]}, {}, 4)
    record = trace.step(settings)
    rv = session.reveal(tally, choices, record)
    assert rv["rows"][0]["answers"] == 3 and rv["rows"][0]["share"] == 0.75
    assert rv["rows"][0]["stated_mean"] == 0.5
    assert rv["chosen_id"] == record.token_id and rv["chosen_rank"] == record.rank + 1
    sentence = session.reveal_sentence(rv)
    assert sentence.startswith(f"3 of 4 picked '{choices[0]['label']}', the model gave it")
    assert f"rank {record.rank + 1}" in sentence


def test_the_choices_caption_is_exact_only_when_the_teacher_has_the_whole_distribution():
    """An engine's top N (-inf for the rest, log-probabilities for the returned) is measured and said so."""
    whole = session.distribution_of(torch.tensor([2.0, 1.0, 0.5, -3.0]))
    assert whole == {"returned": 4, "vocabulary": 4, "mass": 1.0}
    assert session.choices_caption(whole, teacher=True) == ("exact", session.TEACHER_CHOICES_CAPTION)
    top_two = session.distribution_of(torch.log(torch.tensor([0.6, 0.3, 0.0, 0.0])).float())
    assert top_two["returned"] == 2 and top_two["mass"] == pytest.approx(0.9)
    kind, text = session.choices_caption(top_two, teacher=False)
    assert kind == "measured" and "top 2 of 4 tokens (90.00% of the probability)" in text
    assert "over all its tokens" not in session.choices_caption(top_two, teacher=True)[1]
    assert session.choices_caption(None, teacher=True)[0] == "exact"  # a state published before this field
