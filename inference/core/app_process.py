"""The app as its own process: `streamlit run app.py` on a free loopback port, waited for until its health check
answers, stopped by whoever started it. For what measures or drives the real app from outside (the page bench,
the browser tests). Nothing here imports Streamlit: the app runs in the child process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from inference.core.paths import PROJECT_ROOT

START_TIMEOUT_S = 240  # the app's first import of torch and transformers, on a busy machine


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_command(port: int, script: str = "app.py") -> list[str]:
    """`streamlit run app.py` (or another `script`, relative to the project) headless on 127.0.0.1:port, without
    usage statistics or a file watcher."""
    options = (
        f"--server.headless true --server.port {port} --server.address 127.0.0.1 --browser.gatherUsageStats false "
        "--browser.serverAddress localhost --server.fileWatcherType none"
    )
    return [sys.executable, "-m", "streamlit", "run", script, *options.split()]


@dataclass(frozen=True)
class AppProcess:
    process: subprocess.Popen
    url: str  # http://127.0.0.1:PORT


@contextmanager
def running_app(
    env_extra: dict | None = None, start_timeout_s: float = START_TIMEOUT_S, script: str = "app.py"
) -> Iterator[AppProcess]:
    """Start the app, wait until `/_stcore/health` says ok (failing fast, with the log's end, if the process dies),
    yield it, then terminate it (killed after 15 s)."""
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)  # noqa: SIM115 (closed in the finally below)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env_extra or {})}
    process = subprocess.Popen(
        app_command(port, script),
        cwd=PROJECT_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + start_timeout_s
        while True:
            if process.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"streamlit exited early:\n{log.read()[-3000:]}")
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError(f"streamlit did not become healthy in {start_timeout_s:.0f} s")
            time.sleep(0.5)
        yield AppProcess(process, url)
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        os.unlink(log.name)
