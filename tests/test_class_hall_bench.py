"""The lecture hall's figure (inference/bench/hall.py) on a throwaway PostgreSQL: followers over two app processes
see the teacher's publishes, and the keys make sense (timings reported, never asserted). About 6 s of polling."""

import pytest

from inference.bench import hall
from tests.postgres_server import require_postgres

pytestmark = pytest.mark.load


def test_followers_over_two_app_processes_on_postgresql_see_the_publishes_and_report_their_cost(capsys):
    require_postgres()
    with hall.throwaway_postgres() as (url, pid):
        level = hall.hall_figures(url, pid, followers=10, publishes=3)
    with capsys.disabled():
        print("\nhall figure (10 followers, 3 publishes; timings under this machine's load):", level)
    assert (level["followers"], level["app_processes"]) == (10, 2) and level["followers_per_core"] >= 1
    assert 10 <= level["updates_seen"] <= level["updates_expected"] == 30  # every follower drew a publish
    assert 0 < level["update_ms_p50"] <= level["update_ms_p95"]
    assert level["app_cpu_ms_per_s_per_follower"] > 0 and level["db_cpu_ms_per_s_per_follower"] > 0
    assert "followers per core" in hall.sentence(level)
