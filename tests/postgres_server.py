"""A throwaway PostgreSQL for the tests (`inference.bench.hall.throwaway_postgres`: Debian's server binaries, a
folder under /tmp, 127.0.0.1 only, deleted afterwards). Without the package the tests skip, in CI they fail."""

from __future__ import annotations

import os
import pwd
from contextlib import contextmanager
from pathlib import Path

import pytest

from inference.bench.hall import SERVER_USER, postgres_bin, throwaway_postgres

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_postgres() -> Path:
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
    require_postgres()
    with throwaway_postgres() as (url, _pid):
        yield url
