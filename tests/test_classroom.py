"""Class mode's store and reveal: answers counted exactly under a rush, the teacher's controls checked
server side, expiry, cap and bad codes each one sentence."""

import subprocess
import sys
import threading

import pytest
import torch

from inference.core.paths import PROJECT_ROOT
from inference.core.run import new_trace
from inference.lessons.classroom import session
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassError, SqliteClassStore, Tally, normalise_code
from inference.sampling.pipeline import SamplingSettings

pytestmark = pytest.mark.unit


@pytest.fixture
def store(tmp_path):
    return SqliteClassStore(tmp_path / "classes.sqlite3", max_members=40)


def test_thirty_students_answering_at_once_are_all_counted_once(store):
    code, secret = store.create()
    store.open_guess(code, secret, "run:3:0")
    members = [store.join(code) for _ in range(30)]
    picks = [i % 4 for i in range(30)]  # token ids 0..3

    def answer(i):
        store.answer(code, members[i], "run:3:0", picks[i], stated_prob=0.25)
        store.answer(code, members[i], "run:3:0", picks[i], stated_prob=0.25)  # twice: replaces, not adds

    threads = [threading.Thread(target=answer, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tally = store.tally(code, "run:3:0")
    assert tally.answers == 30
    assert tally.counts == {0: 8, 1: 8, 2: 7, 3: 7}
    assert tally.names == {}  # names are off: counted, not attributed
    assert store.info(code).members == 30


JOIN_AND_ANSWER = """
import sys
from inference.lessons.classroom.store import SOMETHING_ELSE, SqliteClassStore
path, code, step, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = SqliteClassStore(path)
for i in range(n):
    s.answer(code, s.join(code), step, SOMETHING_ELSE if i % 2 else 7)
"""


def test_two_processes_share_one_class_file(tmp_path):
    path = tmp_path / "classes.sqlite3"
    store = SqliteClassStore(path)
    code, secret = store.create()
    store.open_guess(code, secret, "s")
    args = [sys.executable, "-c", JOIN_AND_ANSWER, str(path), code, "s", "10"]
    procs = [subprocess.Popen(args, cwd=PROJECT_ROOT) for _ in range(2)]
    assert [p.wait(120) for p in procs] == [0, 0]
    tally = store.tally(code, "s")
    assert tally.answers == 20 and tally.counts == {7: 10, SOMETHING_ELSE: 10}


def test_only_the_teachers_secret_drives_the_class(store):
    code, secret = store.create()
    member = store.join(code)
    for wrong in ("", member, secret[:-1] + ("x" if secret[-1] != "x" else "y")):
        with pytest.raises(ClassError, match="Only the teacher"):
            store.publish(code, wrong, {"step": 1})
        with pytest.raises(ClassError, match="Only the teacher"):
            store.open_guess(code, wrong, "s")
    assert store.publish(code, secret, {"step": 1}) == 1
    assert store.info(code).state == {"step": 1}


def test_answers_only_for_the_open_step_and_from_members(store):
    code, secret = store.create()
    member = store.join(code)
    with pytest.raises(ClassError, match="closed"):
        store.answer(code, member, "s", 1)
    store.open_guess(code, secret, "s")
    with pytest.raises(ClassError, match="not in this class"):
        store.answer(code, "made-up", "s", 1)
    with pytest.raises(ClassError, match="0 to 1"):
        store.answer(code, member, "s", 1, stated_prob=1.5)


def test_idle_class_expires_with_a_sentence(tmp_path):
    now = [1000.0]
    store = SqliteClassStore(tmp_path / "c.sqlite3", idle_seconds=60, clock=lambda: now[0])
    code, _ = store.create()
    now[0] += 61
    with pytest.raises(ClassError, match="has ended: nobody used it for 1 minutes"):
        store.info(code)
    with pytest.raises(ClassError, match="no class with the code"):  # and its rows are gone
        store.info(code)


def test_cap_and_bad_codes(tmp_path):
    store = SqliteClassStore(tmp_path / "c.sqlite3", max_members=2)
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


def test_names_only_when_the_teacher_turns_them_on(store):
    code, secret = store.create(names_on=True)
    store.open_guess(code, secret, "s")
    store.answer(code, store.join(code, "Ada"), "s", 5)
    assert store.tally(code, "s").names == {5: ["Ada"]}


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
