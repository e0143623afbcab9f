"""The class store's rules on both back ends, SQLite and PostgreSQL (tests/postgres_server.py; skipped without it
outside CI): many writers at once lose no guess and no step; the cap holds under a rush; a step closed while
answers arrive counts exactly the accepted ones; only the teacher drives a class; stores opened at once agree."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from itertools import count

import pytest

from inference.core.paths import PROJECT_ROOT
from inference.lessons.classroom.store import (
    SOMETHING_ELSE,
    ClassError,
    ClassStore,
    PostgresConnections,
    normalise_code,
)
from tests.browser import free_port
from tests.postgres_server import postgres_server

pytestmark = pytest.mark.unit

_databases = count()


@pytest.fixture(scope="module")
def postgres_url():
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def location(request, tmp_path):
    """A new, empty place for classes: a file, or a new database on the module's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "classes.sqlite3")
    import psycopg

    url = request.getfixturevalue("postgres_url")
    name = f"classes_{next(_databases)}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def test_many_writers_at_once_lose_no_guess_and_no_step(location):
    """40 students join and answer (each twice: the second replaces the first) while the teacher publishes 30
    steps, all at once from 48 threads: every answer is counted once and every publish raised the version."""
    store = ClassStore(location)
    code, secret = store.create()
    store.open_guess(code, secret, "r:1:0")  # version 1
    students, publishes = 40, 30

    def student(i):
        member = store.join(code)
        store.answer(code, member, "r:1:0", 99, stated_prob=0.5)
        store.answer(code, member, "r:1:0", i % 5, stated_prob=0.1)
        return member

    def teacher(step):
        return store.publish(code, secret, {"step": step})

    with ThreadPoolExecutor(48) as pool:
        members = pool.map(student, range(students))
        versions = list(pool.map(teacher, range(publishes)))
        members = list(members)
    tally = store.tally(code, "r:1:0")
    assert len(set(members)) == students and store.info(code).members == students
    assert tally.answers == students
    assert tally.counts == {k: students // 5 for k in range(5)}
    assert tally.stated_probs == {k: [0.1] * (students // 5) for k in range(5)}
    assert sorted(versions) == list(range(2, publishes + 2))  # each publish saw its own version: none lost
    assert store.info(code).version == publishes + 1


JOIN_AND_ANSWER = """
import sys
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassStore
location, code, step, n, pick = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
s = ClassStore(location)
for i in range(n):
    s.answer(code, s.join(code), step, pick)
"""


def test_four_processes_answering_one_class_are_all_counted(location):
    """Four app processes (here: four Python processes) on one store, as several hosts share one database."""
    store = ClassStore(location, max_members=100)
    code, secret = store.create()
    store.open_guess(code, secret, "s")
    picks = [7, 8, 9, SOMETHING_ELSE]
    procs = [
        subprocess.Popen([sys.executable, "-c", JOIN_AND_ANSWER, location, code, "s", "15", str(p)], cwd=PROJECT_ROOT)
        for p in picks
    ]
    assert [p.wait(180) for p in procs] == [0] * len(picks)
    tally = store.tally(code, "s")
    assert tally.answers == 60 and tally.counts == {p: 15 for p in picks}


def test_the_cap_holds_under_a_rush_of_joins(location):
    store = ClassStore(location, max_members=10)
    code, _ = store.create()
    outcomes = []

    def join(_):
        try:
            store.join(code)
            outcomes.append("in")
        except ClassError as err:
            assert "is full (10 students)" in str(err)
            outcomes.append("full")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(join, range(30)))
    assert outcomes.count("in") == 10 and outcomes.count("full") == 20
    assert store.info(code).members == 10


def test_closing_a_step_while_answers_arrive_counts_exactly_the_accepted_ones(location):
    """Answers race the teacher's close: each is either accepted (and then counted) or refused as closed."""
    store = ClassStore(location, max_members=200)
    code, secret = store.create()
    store.open_guess(code, secret, "s")
    members = [store.join(code) for _ in range(60)]
    accepted, refused = [], []
    go = threading.Event()

    def answer(member):
        go.wait()
        try:
            store.answer(code, member, "s", 1)
            accepted.append(member)
        except ClassError as err:
            assert "has closed" in str(err)
            refused.append(member)

    threads = [threading.Thread(target=answer, args=(m,)) for m in members]
    for t in threads:
        t.start()
    go.set()
    store.open_guess(code, secret, None)
    tally_at_close = store.tally(code, "s").answers
    for t in threads:
        t.join()
    assert len(accepted) + len(refused) == 60
    assert store.tally(code, "s").answers == len(accepted) == tally_at_close


def test_only_the_teachers_secret_or_browser_key_drives_the_class_and_only_members_answer_the_open_step(location):
    store = ClassStore(location)
    code, secret = store.create(teacher_key="browser-key-of-the-teacher")
    other, other_secret = store.create(teacher_key="another-browser")
    member = store.join(code)
    with pytest.raises(ClassError, match="closed"):  # answers only for the open step, from members
        store.answer(code, member, "s", 1)
    store.open_guess(code, secret, "s")
    with pytest.raises(ClassError, match="not in this class"):
        store.answer(code, "made-up", "s", 1)
    with pytest.raises(ClassError, match="0 to 1"):
        store.answer(code, member, "s", 1, stated_prob=1.5)
    for wrong in ("", member, other_secret, "another-browser", secret[:-1] + ("x" if secret[-1] != "x" else "y")):
        with pytest.raises(ClassError, match="Only the teacher"):
            store.publish(code, wrong, {"step": 1})
        with pytest.raises(ClassError, match="Only the teacher"):
            store.open_guess(code, wrong, "s")
    assert store.publish(code, secret, {"step": 1}, checkpoint={"ids": [1, 2]}) == 2  # (opening the step was 1)
    assert store.publish(code, "browser-key-of-the-teacher", {"step": 2}) == 3  # the checkpoint stays
    assert store.info(code).state == {"step": 2}  # followers never read the checkpoint
    assert store.taught_by("browser-key-of-the-teacher") == (code, {"ids": [1, 2]})
    assert store.taught_by("another-browser") == (other, None)
    assert store.taught_by("nobody") is None and store.taught_by("") is None


def test_codes_names_bad_codes_and_how_a_class_ends(location):
    store = ClassStore(location)
    codes = {store.create()[0] for _ in range(20)}
    assert len(codes) == 20 and all(len(c) == 8 and not set(c) & set("01OIL") for c in codes)
    assert normalise_code(" ab-c d ") == "ABCD"
    code, secret = store.create(names_on=True)
    store.open_guess(code, secret, "s")
    store.answer(code, store.join(code.lower(), "Ada"), "s", 5)  # codes are read case-insensitively
    assert store.tally(code, "s").names == {5: ["Ada"]}
    with pytest.raises(ClassError, match="no class with the code ZZZ"):
        store.join("zzz")
    store.end(code, secret)
    with pytest.raises(ClassError, match="no class with the code"):
        store.info(code)
    now = [1000.0]  # an idle class ends with a sentence, and its rows go
    store.idle_seconds, store.clock = 60, lambda: now[0]
    code, secret = store.create(teacher_key="k")
    store.join(code)
    now[0] += 61
    assert store.taught_by("k") is None
    with pytest.raises(ClassError, match="has ended: nobody used it for 1 minute\\."):
        store.info(code)
    with pytest.raises(ClassError, match="no class with the code"):
        store.info(code)


def test_stores_opened_at_once_on_either_back_end_create_one_schema(location):
    stores = list(ThreadPoolExecutor(4).map(lambda _: ClassStore(location), range(4)))
    assert isinstance(stores[0].db, PostgresConnections) == location.startswith("postgresql://")
    code, secret = stores[0].create()
    assert stores[3].publish(code, secret, {"step": 0}) == 1 and stores[2].info(code).state == {"step": 0}


def test_a_database_that_does_not_answer_is_one_sentence_without_the_password():
    with pytest.raises(ClassError, match=r"The class database at 127\.0\.0\.1:\d+ does not answer") as err:
        ClassStore(f"postgresql://lab:hunter2@127.0.0.1:{free_port()}/lab")
    assert "hunter2" not in str(err.value)
