"""A throwaway PostgreSQL for the tests: Debian's server binaries (`apt-get install postgresql`), a data folder of
its own under /tmp, listening on 127.0.0.1 only, stopped and deleted when the block ends.

PostgreSQL refuses to run as root, so as root the server runs as Debian's `postgres` user (`runuser`), which
owns the folder. Trust authentication on loopback: the server lives for one test run and holds nothing else.
`.ci/run` installs the package; outside CI a machine without it skips the PostgreSQL tests, in CI they fail
(`require_postgres`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.browser import free_port

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
SERVER_USER = "postgres"  # Debian's package creates it
DATABASE_USER = "lab"


def server_bin() -> Path | None:
    """The newest installed major version's bin folder (Debian: /usr/lib/postgresql/<major>/bin)."""
    found = [
        p for p in Path("/usr/lib/postgresql").glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()
    ]
    return max(found, key=lambda p: int(p.parent.name)) if found else None


def require_postgres() -> Path:
    """The server's bin folder; skip without it (saying how to install it), or fail in CI."""
    found = server_bin()
    if found is None:
        reason = "PostgreSQL's server is not installed: apt-get install postgresql (Debian) runs these tests"
        if IN_CI:
            pytest.fail("CI must install PostgreSQL before the tests (.ci/run does): " + reason)
        pytest.skip(reason)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            pytest.fail(f"running as root, PostgreSQL needs the {SERVER_USER!r} user that Debian's package creates")
    return found


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", SERVER_USER, "--", *args] if os.geteuid() == 0 else args


@contextmanager
def postgres_server():
    """Start a server; yield its URL (`postgresql://lab@127.0.0.1:<port>/postgres`); stop and delete it."""
    bin_dir = require_postgres()
    folder = Path(tempfile.mkdtemp(prefix="inference-lab-pg-"))
    data, log = folder / "data", folder / "server.log"
    if os.geteuid() == 0:
        shutil.chown(folder, SERVER_USER, SERVER_USER)
    port = free_port()
    run = dict(check=True, capture_output=True, text=True, timeout=120, cwd=folder)
    try:
        subprocess.run(
            _as_server_user(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    DATABASE_USER,
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            **run,
        )
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        subprocess.run(
            _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "start"]),
            **run,
        )
        try:
            yield f"postgresql://{DATABASE_USER}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
                timeout=60,
                cwd=folder,
            )
    except subprocess.CalledProcessError as err:
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not start: {err.stderr or err.stdout}\n{tail}") from err
    finally:
        shutil.rmtree(folder, ignore_errors=True)
