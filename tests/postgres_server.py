"""A throwaway PostgreSQL for the tests: Debian's server binaries (`apt-get install postgresql`), a data folder of
its own under /tmp, listening on 127.0.0.1 only, stopped and deleted when the block ends. The server itself is
`inference.bench.hall.throwaway_postgres` (the hall bench starts the same one); here, when it is missing.

PostgreSQL refuses to run as root, so as root the server runs as Debian's `postgres` user (`runuser`), which
owns the folder. Trust authentication on loopback: the server lives for one test run and holds nothing else.
`.ci/run` installs the package; outside CI a machine without it skips the PostgreSQL tests, in CI they fail
(`require_postgres`).
"""

from __future__ import annotations

import os
import pwd
from contextlib import contextmanager
from pathlib import Path

import pytest

from inference.bench.hall import SERVER_USER, postgres_bin, throwaway_postgres

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_postgres() -> Path:
    """The server's bin folder; skip without it (saying how to install it), or fail in CI."""
    found = postgres_bin()
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


@contextmanager
def postgres_server():
    """Start a server; yield its URL (`postgresql://lab@127.0.0.1:<port>/postgres`); stop and delete it."""
    require_postgres()
    with throwaway_postgres() as (url, _pid):
        yield url
