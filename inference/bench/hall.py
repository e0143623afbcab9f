"""A lecture hall's figure: followers of one class (`classroom.Followers`) spread over two app processes sharing a
PostgreSQL store, the teacher here publishing every 2 s.

    python -m inference.bench.hall [--json] [--followers 30 100] [--publishes 10] [--db postgresql://...]

Measured: update latency, publish to drawn, p50 and p95 (a poll a second puts ~500 ms of it in waiting); server CPU
per follower, the app processes' and PostgreSQL's (every backend) per second of wall time, divided by the followers
(1000 ms/s is one core). Left out: Streamlit's fragment rerun, the WebSocket and the browsers. Without `--db`, a
throwaway PostgreSQL from Debian's package (`throwaway_postgres`, as the tests use) on loopback, its data under /tmp.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path

import psutil

from inference.bench.classroom import POLL_SECONDS, Followers, class_state
from inference.core.app_process import free_port
from inference.core.machine import cpu_name, logical_cpus
from inference.core.measuring import Stopwatch
from inference.lessons.classroom.store import ClassStore
from inference.lessons.serving.replay import percentile

APP_PROCESSES = 2
PUBLISH_EVERY_S = 2.0
SERVER_USER = "postgres"  # Debian's package creates it; PostgreSQL refuses to run as root


def postgres_bin() -> Path | None:
    """The newest installed major version's bin folder (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb") if (p.parent / "pg_ctl").exists()]
    return max(found, key=lambda p: int(p.parent.name)) if found else None


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *args] if os.geteuid() == 0 else args


@contextmanager
def throwaway_postgres():
    """Start a PostgreSQL on 127.0.0.1 with its own data folder under /tmp (trust authentication: it lives for one
    run and holds nothing else); yield (URL, the server's main pid); stop and delete it."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL's server is not installed: apt-get install postgresql (Debian)")
    folder = Path(tempfile.mkdtemp(prefix="inference-lab-pg-"))
    data, log = folder / "data", folder / "server.log"
    if os.geteuid() == 0:
        pwd.getpwnam(SERVER_USER)  # KeyError: no postgres user to run the server as
        shutil.chown(folder, SERVER_USER, SERVER_USER)
    port = free_port()
    run = dict(check=True, capture_output=True, text=True, timeout=120, cwd=folder)
    initdb = [str(bin_dir / "initdb"), "-D", str(data), "-U", "lab", "--auth=trust", "-E", "UTF8", "--no-sync"]
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    try:
        subprocess.run(_as_server_user(initdb), **run)
        pg_ctl = [str(bin_dir / "pg_ctl"), "-D", str(data)]
        subprocess.run(_as_server_user([*pg_ctl, "-o", options, "-l", str(log), "-w", "start"]), **run)
        try:
            pid = int((data / "postmaster.pid").read_text().split()[0])
            yield f"postgresql://lab@127.0.0.1:{port}/postgres", pid
        finally:
            stop = [*pg_ctl, "-m", "immediate", "-w", "stop"]
            subprocess.run(_as_server_user(stop), capture_output=True, timeout=60, cwd=folder)
    except subprocess.CalledProcessError as err:
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {err.stderr or err.stdout}\n{tail}") from err
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process and its children (PostgreSQL: the server and its backends)."""
    total = 0.0
    with suppress(psutil.NoSuchProcess):
        main = psutil.Process(pid) if pid else None  # None: a server elsewhere, its CPU not read
        for p in [main, *main.children(recursive=True)] if main else []:
            with suppress(psutil.NoSuchProcess):
                total += sum(p.cpu_times()[:2])
    return total


def _app_process(url: str, code: str, phases: list[float], stop, ready, out) -> None:
    students = Followers(ClassStore(url), code, phases)
    students.start()
    ready.put(os.getpid())
    stop.wait()
    out.put(students.stop())


def hall_figures(url: str, db_pid: int | None, followers: int, publishes: int = 10) -> dict:
    store = ClassStore(url, max_members=10_000)
    code, secret = store.create()
    store.publish(code, secret, class_state(0))
    ctx = multiprocessing.get_context("spawn")
    stop, ready, out = ctx.Event(), ctx.Queue(), ctx.Queue()
    phases = [i * POLL_SECONDS / followers for i in range(followers)]  # the processes' followers interleaved
    apps = [
        ctx.Process(target=_app_process, args=(url, code, phases[k::APP_PROCESSES], stop, ready, out))
        for k in range(APP_PROCESSES)
    ]
    for p in apps:
        p.start()
    for _ in apps:  # imports done (seconds on a loaded machine) and every follower has drawn the first state
        ready.get(timeout=600)
    app_cpu0, db_cpu0 = sum(_cpu_s(p.pid) for p in apps), _cpu_s(db_pid)
    with Stopwatch() as watch:
        for step in range(1, publishes + 1):
            store.publish(code, secret, class_state(step))
            time.sleep(PUBLISH_EVERY_S)
    wall = watch.ms / 1000
    app_cpu, db_cpu = sum(_cpu_s(p.pid) for p in apps) - app_cpu0, _cpu_s(db_pid) - db_cpu0
    stop.set()
    delays = sorted(d for _ in apps for d in out.get(timeout=60))
    for p in apps:
        p.join(30)
    store.end(code, secret)
    app_ms, db_ms = 1000 * app_cpu / wall / followers, 1000 * db_cpu / wall / followers
    return {
        "followers": followers,
        "app_processes": APP_PROCESSES,
        "updates_seen": len(delays),
        "updates_expected": followers * publishes,
        "update_ms_p50": round(1000 * percentile(delays, 50), 1),
        "update_ms_p95": round(1000 * percentile(delays, 95), 1),
        "app_cpu_ms_per_s_per_follower": round(app_ms, 2),
        "db_cpu_ms_per_s_per_follower": round(db_ms, 2),
        "followers_per_core": int(1000 / (app_ms + db_ms)) if app_ms + db_ms > 0 else None,
    }


def sentence(level: dict) -> str:
    """The README's students-per-server sentence, from one level's measurement."""
    return (
        f"{level['followers']} followers over {level['app_processes']} app processes on PostgreSQL saw a Step in "
        f"{level['update_ms_p50']:.0f} ms (p50), {level['update_ms_p95']:.0f} ms (p95), and cost "
        f"{level['app_cpu_ms_per_s_per_follower']:.1f} ms of app CPU and {level['db_cpu_ms_per_s_per_follower']:.2f} "
        f"ms of database CPU per second each: about {level['followers_per_core']} followers per core."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, nargs="+", default=[30, 100])
    parser.add_argument("--publishes", type=int, default=10)
    parser.add_argument("--db", help="a postgresql:// URL (default: a throwaway server from Debian's package)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    conditions = {"cpu": cpu_name(), "logical_cpus": logical_cpus(), "load_average_1m": os.getloadavg()[0]}
    with throwaway_postgres() if args.db is None else nullcontext((args.db, None)) as (url, pid):  # its CPU unread
        levels = [hall_figures(url, pid, n, args.publishes) for n in args.followers]
    conditions["load_average_1m_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"conditions": conditions, "levels": levels}, indent=1))
    else:
        print(conditions)
        for level in levels:
            print(sentence(level))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
