"""An engine server lives exactly as long as whoever started it.

- Told to stop (SIGTERM from a supervisor, SIGINT from Ctrl-C, SIGHUP when its terminal closes): `stop_signals` turns
  each into an exception, so the starter's `finally` stops the server.
- Dead without running any code (SIGKILL, a crash, the OOM killer): Linux's parent-death signal, set by util-linux's
  `setpriv --pdeathsig` before it execs the server (`dying_with_parent`), sends the server SIGTERM. Linux sends it when
  the *thread* that started the server ends: start a server on a thread that outlives it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from inference.core.measuring import ms_since, now
from inference.engines.client import EngineClient

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def dying_with_parent(args: list[str]) -> list[str]:
    """`args` run so that the server gets SIGTERM when its parent (thread) dies; elsewhere (macOS, or no setpriv) as
    they are, stopped by `stop_signals` alone. setpriv execs the server, which keeps its process id."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "TERM", "--", *args] if setpriv else list(args)


def stop_process(process: subprocess.Popen, timeout: float = 10.0, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after `timeout` s. `group`: the process leads its own session and the signals go to every
    process in it (an engine's own workers too)."""
    if process.poll() is not None and not group:
        return

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig) if group else process.send_signal(sig)

    send(signal.SIGTERM)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        process.wait(5)
    if group:  # workers that ignored SIGTERM after their leader exited
        send(signal.SIGKILL)


class Stopped(Exception):
    """Raised in the main thread when a stop signal arrives inside `stop_signals()`."""


@contextlib.contextmanager
def stop_signals():
    """While inside, SIGTERM, SIGINT and SIGHUP raise `Stopped` in the main thread, so `finally` blocks (the server's
    `stop()`) run, also while a server is still starting; the previous handlers come back after."""

    def on_signal(signum, frame):
        raise Stopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class ServerProcess:
    """What every started engine server does the same way. A subclass (a dataclass with `url`, `process`, `log_path`
    and `started_s`) sets how long `stop` waits for SIGTERM and whether the signals go to the whole session."""

    STOP_TIMEOUT_S = 10.0
    STOP_GROUP = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float | None = None) -> None:
        stop_process(self.process, self.STOP_TIMEOUT_S if timeout is None else timeout, group=self.STOP_GROUP)

    def log_tail(self, lines: int = 5) -> str:
        """The last `lines` of the server's log (empty if it cannot be read): what an error sentence quotes."""
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def ready(self, started: float, *checks):
        """Run each check on this just-started server; one that fails or is interrupted stops the server first. Then
        `started_s` is the seconds since `started` (a `measuring.now()`)."""
        try:
            for check in checks:
                check(self)
        except BaseException:
            self.stop()
            raise
        self.started_s = ms_since(started) / 1000
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def wait_healthy(server: ServerProcess, name: str, timeout: float, poll_s: float) -> None:
    """Wait until `server` answers /health with 200; one that exits first, or stays unhealthy past `timeout`, raises a
    RuntimeError quoting its log."""
    started = now()
    with EngineClient(server.url, timeout=2.0) as client:
        while ms_since(started) < timeout * 1000:
            if not server.alive():
                raise RuntimeError(f"{name} exited with code {server.process.returncode}: {server.log_tail(3)}")
            if client.health():
                return
            time.sleep(poll_s)
    raise RuntimeError(f"{name} did not become healthy within {timeout:g} s: {server.log_tail(3)}")
