"""Class mode's bench keys: how soon 30 followers see a teacher's Step, and what their polling costs.

Followers are threads doing what a student's fragment does every second: read the class from the SQLite
file, and when its version changed, take the two charts of that version (built once for all followers, as the
page caches them) and serialise them to JSON (what Streamlit sends each follower). The teacher publishes a new state every `publish_every` seconds, like Steps in class.
Left out: Streamlit's own fragment rerun and the websocket (the browser test measures a real follower end to
end, across two app processes). `class_followers_update_ms_p95`: from a publish until a follower has drawn it,
95th percentile over followers and publishes; `class_followers_cpu_ms_per_s`: this process's CPU time per
second of wall time while they poll (1000 = one core busy).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from inference.lessons.classroom.figures import choices_chart, reveal_chart
from inference.lessons.classroom.store import SqliteClassStore

POLL_SECONDS = 1.0  # the student's fragment: run_every=1.0 in app_pages/class.py


def _state(step: int) -> dict:
    """A published state of the real page's shape (15 choices, a reveal of 10 rows)."""
    choices = [{"id": i, "label": f"␣tok{i}", "raw": 0.5 / (i + 1), "final": 0.6 / (i + 1)} for i in range(15)]
    rows = [
        {"id": i, "label": f"␣tok{i}", "answers": 3, "share": 0.1, "model_prob": 0.6 / (i + 1), "names": []}
        for i in range(10)
    ]
    reveal = {"answers": 30, "something_else": 0, "rows": rows, "chosen_id": 0, "u": 0.5, "chosen_rank": 1}
    return {"step": step, "choices": choices, "reveal": reveal, "published_at": time.time()}


_BUILT: dict[int, tuple] = {}
_BUILT_LOCK = threading.Lock()


def charts(version: int, state: dict) -> tuple:
    """The page's `charts`: one build per published version, shared by every follower."""
    with _BUILT_LOCK:
        if version not in _BUILT:
            _BUILT[version] = (choices_chart(state["choices"]), reveal_chart(state["reveal"]))
        return _BUILT[version]


def class_figures(followers: int = 30, publishes: int = 10, publish_every: float = 2.0) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteClassStore(Path(folder) / "classes.sqlite3")
        code, secret = store.create()
        store.publish(code, secret, _state(0))
        delays: list[float] = []
        lock = threading.Lock()
        stop = threading.Event()

        def follow(offset: float) -> None:
            seen = 0
            time.sleep(offset)  # students poll from their own phase
            while not stop.is_set():
                info = store.info(code)
                if info.version != seen:
                    seen = info.version
                    for figure in charts(info.version, info.state):
                        figure.to_json(validate=False)
                    if info.state["step"] > 0:
                        with lock:
                            delays.append(time.time() - info.state["published_at"])
                time.sleep(POLL_SECONDS)

        threads = [
            threading.Thread(target=follow, args=(i * POLL_SECONDS / followers,), daemon=True) for i in range(followers)
        ]
        for t in threads:
            t.start()
        time.sleep(POLL_SECONDS + 0.5)  # everyone has drawn the first state
        cpu0, wall0 = time.process_time(), time.perf_counter()
        for step in range(1, publishes + 1):
            store.publish(code, secret, _state(step))
            time.sleep(publish_every)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        stop.set()
        for t in threads:
            t.join(5)
    delays.sort()
    return {
        "class_followers": followers,
        "class_followers_update_ms_p50": round(1000 * statistics.median(delays), 1),
        "class_followers_update_ms_p95": round(1000 * delays[int(0.95 * (len(delays) - 1))], 1),
        "class_followers_cpu_ms_per_s": round(1000 * cpu / wall, 1),
        "class_followers_updates_seen": len(delays),
    }


if __name__ == "__main__":
    print(class_figures())
