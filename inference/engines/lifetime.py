"""An engine server lives exactly as long as whoever started it. Told to stop (SIGTERM, SIGINT, SIGHUP),
`stop_signals` turns the signal into an exception so the starter's `finally` stops the server; dead without running
any code (SIGKILL, a crash), Linux's parent-death signal (util-linux's `setpriv --pdeathsig`, `dying_with_parent`)
sends the server SIGTERM. Linux sends it when the *thread* that started the server ends: start a server on a thread
that outlives it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from inference.core.measuring import ms_since
from inference.engines.client import EngineClient

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def dying_with_parent(args: list[str]) -> list[str]:
    """`args` run so the server gets SIGTERM when its parent thread dies (setpriv execs it: the same pid); elsewhere
    (macOS, no setpriv) as they are."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    return [setpriv, "--pdeathsig", "TERM", "--", *args] if setpriv else list(args)


def stop_process(process: subprocess.Popen, timeout: float = 10.0, group: bool = False) -> None:
    """SIGTERM, then SIGKILL after `timeout` s; `group`: to every process of its session (an engine's workers)."""
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
    """While inside, SIGTERM, SIGINT and SIGHUP raise `Stopped` in the main thread; the old handlers come back after."""

    def on_signal(signum, frame):
        raise Stopped(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class ServerProcess:
    """What every started engine server does alike; a subclass is a dataclass with `url`, `process`, `log_path` and
    `started_s`, and says how long `stop` waits for SIGTERM and whether the signals go to the whole session."""

    STOP_TIMEOUT_S = 10.0
    STOP_GROUP = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float | None = None) -> None:
        stop_process(self.process, self.STOP_TIMEOUT_S if timeout is None else timeout, group=self.STOP_GROUP)

    def log_tail(self, lines: int = 3) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        return ""

    def ready(self, started: float, name: str, timeout_s: float, poll_s: float, warm_up=None):
        """Wait until the just-started server answers `/health` (a RuntimeError quoting its log if it exits first or
        stays unhealthy past `timeout_s`), then run `warm_up(self)`; any failure or signal stops it first."""
        try:
            with EngineClient(self.url, timeout=2.0) as client:
                while not client.health():
                    if not self.alive():
                        raise RuntimeError(f"{name} exited with code {self.process.returncode}: {self.log_tail()}")
                    if ms_since(started) > timeout_s * 1000:
                        raise RuntimeError(f"{name} did not become healthy within {timeout_s:g} s: {self.log_tail()}")
                    time.sleep(poll_s)
            if warm_up is not None:
                warm_up(self)
        except BaseException:
            self.stop()
            raise
        self.started_s = ms_since(started) / 1000
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
