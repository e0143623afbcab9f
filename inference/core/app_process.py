"""The app as its own process (`streamlit run app.py` on a free loopback port), for what measures or drives the real
app from outside: the page bench, the browser tests. Nothing here imports Streamlit."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from inference.core.measuring import ms_since, now
from inference.core.paths import PROJECT_ROOT

START_TIMEOUT_S = 240  # the app's first import of torch and transformers, on a busy machine
OPTIONS = "--server.headless true --server.address 127.0.0.1 --browser.gatherUsageStats false "
OPTIONS += "--browser.serverAddress localhost --server.fileWatcherType none"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class AppProcess:
    process: subprocess.Popen
    url: str  # http://127.0.0.1:PORT


@contextmanager
def running_app(
    env_extra: dict | None = None, start_timeout_s: float = START_TIMEOUT_S, script: str = "app.py"
) -> Iterator[AppProcess]:
    """Start the app (or another `script` of the project), wait until `/_stcore/health` says ok (failing fast, with
    the log's end, if it dies), yield it, then terminate it (killed after 15 s)."""
    port = free_port()
    command = [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port), *OPTIONS.split()]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            command, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env
        )
        url, started = f"http://127.0.0.1:{port}", now()
        try:
            while not _healthy(url):
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"streamlit exited early:\n{log.read()[-3000:]}")
                if ms_since(started) > start_timeout_s * 1000:
                    raise RuntimeError(f"streamlit did not become healthy in {start_timeout_s:.0f} s")
                time.sleep(0.5)
            yield AppProcess(process, url)
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


def _healthy(url: str) -> bool:
    with suppress(OSError):
        return urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok"
    return False
