"""A lecture hall on two app hosts, run from deploy/hall/ as written (only addresses and ports changed): two app
processes on two loopback addresses (127.0.0.2 = host A, 127.0.0.3 = host B) with app-host.sh's flags and variables,
one PostgreSQL class store (tests/postgres_server.py), nginx with deploy/hall/nginx.conf in front. The teacher's
browser lands on A, two students' on B (each cookie picked by asking nginx where it sends it).

Checked: the teacher's steps on A reach the students on B, their guesses reach the teacher; then A is killed with
guessing open, the teacher's browser reconnects to B by itself and takes the class up there (rebuilt from the store's
checkpoint) at the same step with the same text and every guess counted, and the next Draw and reveal on B reveals
them on every student's screen. Marker `load` (PostgreSQL, two app processes, nginx and Chromium); `.ci/run` runs it.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

import pytest

from inference.lessons.classroom.store import ClassStore
from tests.browser import SKIP_REASON, chromium_available, free_port, keep_screenshot, launch, open_page, wait_idle
from tests.load_sessions import EXCEPTION_BOX
from tests.postgres_server import postgres_server, require_postgres
from tests.test_class_proxy import (
    access_log,
    deployed_conf,
    nginx_in_front,
    require_nginx,
    started,
    wait_http,
    websocket_upstreams,
    websockets_on,
)

pytestmark = [pytest.mark.load, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")
PROJECT_ROOT = Path(__file__).resolve().parent.parent
HALL = PROJECT_ROOT / "deploy" / "hall"
HOSTS = ("127.0.0.2", "127.0.0.3")  # A (the teacher's), B (the students')
STUDENTS = 2
APP_FLAGS = ["--server.headless", "true", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
APP_ENV = {"INFERENCE_LAB_PUBLIC": "1", "INFERENCE_LAB_ALLOW_LOCAL_FOLDERS": "0", "INFERENCE_LAB_ALLOW_HUB": "0"}


def test_the_hall_files_give_the_flags_and_settings_this_test_runs():
    script = (HALL / "app-host.sh").read_text()
    assert 'streamlit run app.py --server.headless true --server.address "${HOST_ADDRESS:?' in script
    assert "--server.port 8501 --server.fileWatcherType none --browser.gatherUsageStats false" in script
    assert 'INFERENCE_LAB_CLASS_DB="${CLASS_DB:?' in script
    for name, value in APP_ENV.items():
        assert f"{name}={value}" in script, name
    conf = (HALL / "nginx.conf").read_text()
    assert "map $cookie_inference_lab" in conf and "hash $inference_lab_key consistent;" in conf
    assert "HttpOnly" in conf  # the cookie is the teacher's key to take a class up: page scripts must not read it


def upstream_of(base: str, key: str, log: Path) -> str:
    """Where nginx sends a browser with this cookie: one request, then its line in the access log."""
    request = urllib.request.Request(base + "/_stcore/health", headers={"Cookie": f"inference_lab={key}"})
    urllib.request.urlopen(request, timeout=10).read()
    for _ in range(50):
        lines = access_log(log).get(key)
        if lines:
            return lines[-1][1]
        time.sleep(0.1)
    raise AssertionError(f"nginx logged no request for {key}")


def browser_page(browser, base: str, key: str, width: int, errors: list):
    context = browser.new_context(viewport={"width": width, "height": 900 if width > 1000 else 1000})
    context.add_cookies([{"name": "inference_lab", "value": key, "url": base}])
    page = context.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page


GENERATED = "() => document.querySelector('.class-text b')?.textContent || ''"


def generated_text(page) -> str:
    return page.evaluate(GENERATED)


def test_the_teachers_host_dies_and_the_class_goes_on_from_the_same_step_on_the_other(tmp_path):
    require_postgres()
    require_nginx()
    from playwright.sync_api import sync_playwright

    with ExitStack() as stack:
        url = stack.enter_context(postgres_server())
        apps = [(host, free_port()) for host in HOSTS]
        processes = {}
        env = {**os.environ, **APP_ENV, "INFERENCE_LAB_CLASS_DB": url}
        for host, port in apps:
            command = [sys.executable, "-m", "streamlit", "run", "app.py", *APP_FLAGS]
            command += ["--server.address", host, "--server.port", str(port)]
            processes[host] = started(stack, command, tmp_path / f"app-{host}.log", env)
        for host, port in apps:
            wait_http(f"http://{host}:{port}/_stcore/health", 120, processes[host], f"the app on {host}")
        hosts = {"10.0.0.11:8501 ": f"{apps[0][0]}:{apps[0][1]} ", "10.0.0.12:8501 ": f"{apps[1][0]}:{apps[1][1]} "}
        base = nginx_in_front(stack, tmp_path, deployed_conf(HALL / "nginx.conf", hosts))

        # 1. Cookies nginx sends to A (the teacher's) and to B (the students').
        log = tmp_path / "access.log"
        a, b = (f"{host}:{port}" for host, port in apps)
        keys = {a: [], b: []}
        for i in range(200):
            key = f"browser-{i:03d}"
            keys[upstream_of(base, key, log)].append(key)
            if keys[a] and len(keys[b]) >= STUDENTS:
                break
        teacher_key, student_keys = keys[a][0], keys[b][:STUDENTS]

        playwright = stack.enter_context(sync_playwright())
        browser = launch(playwright)
        stack.callback(browser.close)
        errors: list[str] = []

        # 2. The teacher starts a class on A and steps twice; the students join on B.
        teacher = browser_page(browser, base, teacher_key, 1280, errors)
        open_page(teacher, base + "/class")
        teacher.get_by_role("button", name="Start a class").click()
        teacher.get_by_text("Class code:").wait_for(timeout=120_000)
        wait_idle(teacher)
        code = teacher.locator("h3 code").first.text_content().strip()
        for _ in range(2):
            before = generated_text(teacher)
            teacher.get_by_role("button", name="Draw and reveal").click()
            teacher.wait_for_function(f"() => ({GENERATED})() !== {before!r}", timeout=60_000)
            wait_idle(teacher)
        students = [browser_page(browser, base, key, 800, errors) for key in student_keys]
        for student in students:
            open_page(student, f"{base}/class?class={code}")
        written = generated_text(teacher)
        for student in students:
            student.wait_for_function(f"() => ({GENERATED})() === {written!r}", timeout=30_000)

        # 3. Guessing opens; every student answers on B; the teacher on A sees them counted.
        teacher.get_by_role("button", name="Open guessing").click()
        wait_idle(teacher)
        for student in students:
            student.get_by_text("What will the model write next?").wait_for(timeout=15_000)
            student.get_by_role("button", name="Send my guess").click()
            student.get_by_text("Your guess is in").wait_for(timeout=15_000)
        teacher.get_by_text(f"{STUDENTS} of {STUDENTS} students have answered").wait_for(timeout=15_000)
        store = ClassStore(url)
        before_kill = store.info(code)
        assert before_kill.state["step"] == 2 and before_kill.guess_step is not None

        # 4. Host A dies without a word; the teacher's browser reconnects through nginx to B by itself.
        killed_at = time.time()
        processes[HOSTS[0]].send_signal(signal.SIGKILL)
        processes[HOSTS[0]].wait(10)
        deadline = time.monotonic() + 120
        while websockets_on(apps[1][1]) != STUDENTS + 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert websockets_on(apps[1][1]) == STUDENTS + 1, "the teacher's browser did not reconnect to host B"
        # The new session on B reran the page (the old one stays drawn until then) and took the class up.
        wait_idle(teacher, 120_000)
        teacher.get_by_text(f"{STUDENTS} of {STUDENTS} students have answered").wait_for(timeout=60_000)
        assert generated_text(teacher) == written
        assert "· step 3" in teacher.locator('[data-testid="stMain"]').inner_text()
        keep_screenshot(teacher, "hall_teacher_taken_up_1280")
        assert store.info(code).guess_step == before_kill.guess_step

        # 5. The class goes on from there on B: the draw reveals every guess on every screen.
        teacher.get_by_role("button", name="Draw and reveal").click()
        wait_idle(teacher, 120_000)
        after = store.info(code)
        assert after.state["step"] == 3 and after.state["generated"][:2] == before_kill.state["generated"]
        assert after.state["reveal"]["answers"] == STUDENTS
        for student in students:
            student.get_by_text(f"{STUDENTS} of {STUDENTS} picked").first.wait_for(timeout=30_000)
        keep_screenshot(students[0], "hall_student_reveal_800")
        assert not [page for page in [teacher, *students] if page.locator(EXCEPTION_BOX).count()] and not errors

    # 6. nginx's record: the students only ever on B; the teacher on A until the kill, then on B.
    lines = access_log(log)
    for key in student_keys:
        assert {up for _, up, _, _ in lines[key]} == {b}, key
    teacher_lines = lines[teacher_key]
    assert {up for at, up, _, _ in teacher_lines if at < killed_at} == {a}
    assert websocket_upstreams(teacher_lines)[:1] == [a] and b in websocket_upstreams(teacher_lines)[1:]
