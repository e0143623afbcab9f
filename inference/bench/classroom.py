"""Class mode's bench keys: how soon 30 followers see a teacher's Step, and what their polling costs.

A follower (`Followers`, run by the lecture hall's bench in each of its app processes too) is a thread doing what a
student's fragment does every second: read the class from the store and, when its version changed, take the two
charts of that version (built once for all followers, as the page caches them) and serialise them to JSON, what
Streamlit sends. The teacher publishes a new state every `publish_every` seconds, like Steps in class. Left out:
Streamlit's own fragment rerun and the websocket. `class_followers_update_ms_p95`: publish to drawn, 95th percentile;
`class_followers_cpu_ms_per_s`: this process's CPU time per second of wall time while they poll (1000 = one core).
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from pathlib import Path

from inference.core.measuring import Stopwatch, now
from inference.lessons.classroom.figures import choices_chart, reveal_chart
from inference.lessons.classroom.store import ClassStore

POLL_SECONDS = 1.0  # the student's fragment: run_every=1.0 in app_pages/class.py


def class_state(step: int) -> dict:
    """A published state of the real page's shape (15 choices, a reveal of 10 rows)."""
    choices = [{"id": i, "label": f"␣tok{i}", "raw": 0.5 / (i + 1), "final": 0.6 / (i + 1)} for i in range(15)]
    row = {"answers": 3, "share": 0.1, "names": []}
    rows = [{"id": i, "label": f"␣tok{i}", "model_prob": 0.6 / (i + 1)} | row for i in range(10)]
    reveal = {"answers": 30, "something_else": 0, "rows": rows, "chosen_id": 0, "u": 0.5, "chosen_rank": 1}
    # measuring.now() is the system's monotonic clock: the hall's followers in other processes read it too
    return {"step": step, "choices": choices, "reveal": reveal, "published_at": now()}


class Followers:
    """Students following one class, each a thread starting at its own phase (seconds); `delays` gets, for every
    publish after step 0 a follower draws, the seconds from its publish until then."""

    def __init__(self, store, code: str, phases: list[float]):
        self.store, self.code, self.delays = store, code, []
        self._lock, self._built, self._stop = threading.Lock(), {}, threading.Event()
        # released once by each follower that drew its first state (a barrier would line their polls up)
        self._drawn_first = threading.Semaphore(0)
        self._threads = [threading.Thread(target=self._follow, args=(phase,), daemon=True) for phase in phases]

    def start(self, timeout: float = 600) -> None:
        """Start every follower; return once each drew the state published so far (else TimeoutError, not a hang)."""
        for t in self._threads:
            t.start()
        deadline = now() + timeout
        for _ in self._threads:
            if not self._drawn_first.acquire(timeout=max(0.0, deadline - now())):
                raise TimeoutError(f"not every follower drew the first state within {timeout:.0f} s")

    def stop(self) -> list[float]:
        """Stop them; the delays, sorted."""
        self._stop.set()
        for t in self._threads:
            t.join(5)
        with self._lock:
            return sorted(self.delays)

    def _follow(self, phase: float) -> None:
        seen = 0
        time.sleep(phase)
        while not self._stop.is_set():
            info = self.store.info(self.code)
            if info.version != seen:
                first, seen, state = seen == 0, info.version, info.state
                with self._lock:  # built once per version for all followers, as one process's st.cache_resource
                    if seen not in self._built:
                        self._built[seen] = (choices_chart(state["choices"]), reveal_chart(state["reveal"]))
                for figure in self._built[seen]:
                    figure.to_json(validate=False)
                if first:
                    self._drawn_first.release()
                if state["step"] > 0:
                    with self._lock:
                        self.delays.append(now() - state["published_at"])
            time.sleep(POLL_SECONDS)


def class_figures(followers: int = 30, publishes: int = 10, publish_every: float = 2.0) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        store = ClassStore(Path(folder) / "classes.sqlite3")
        code, secret = store.create()
        store.publish(code, secret, class_state(0))
        students = Followers(store, code, [i * POLL_SECONDS / followers for i in range(followers)])
        students.start()
        cpu0 = time.process_time()
        with Stopwatch() as wall:
            for step in range(1, publishes + 1):
                store.publish(code, secret, class_state(step))
                time.sleep(publish_every)
        cpu = time.process_time() - cpu0
        delays = students.stop()
    return {
        "class_followers": followers,
        "class_followers_update_ms_p50": round(1000 * statistics.median(delays), 1),
        "class_followers_update_ms_p95": round(1000 * delays[int(0.95 * (len(delays) - 1))], 1),
        "class_followers_cpu_ms_per_s": round(1000 * 1000 * cpu / wall.ms, 1),
        "class_followers_updates_seen": len(delays),
    }


if __name__ == "__main__":
    print(class_figures())
