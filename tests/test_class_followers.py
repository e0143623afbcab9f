"""The class benches' follower loop (`inference/bench/classroom.Followers`, also run by each of the lecture hall's
app processes): every follower draws every publish, and the charts of a version are built once for all of them."""

import time

import pytest

from inference.bench import classroom
from inference.lessons.classroom.store import ClassStore

pytestmark = pytest.mark.unit


def test_every_follower_draws_every_publish_and_each_versions_charts_are_built_once(tmp_path, monkeypatch):
    built = []
    real_chart = classroom.choices_chart
    monkeypatch.setattr(classroom, "choices_chart", lambda choices: built.append(1) or real_chart(choices))
    store = ClassStore(tmp_path / "classes.sqlite3")
    code, secret = store.create()
    store.publish(code, secret, classroom.class_state(0))
    followers = classroom.Followers(store, code, [0.0, 0.3, 0.6])
    followers.start(timeout=60)
    assert len(built) == 1  # the first state, drawn by all three
    for step in (1, 2):
        store.publish(code, secret, classroom.class_state(step))
        deadline = time.monotonic() + 60  # a busy machine can stretch a poll
        while len(followers.delays) < 3 * step and time.monotonic() < deadline:
            time.sleep(0.1)
    delays = followers.stop()
    assert len(delays) == 3 * 2 and delays == sorted(delays) and all(d >= 0 for d in delays)
    assert len(built) == 3  # one build per published version
