"""A lecture hall as deploy/hall/ says, run as written (only addresses and ports changed): one llama-server, one
PostgreSQL class store (tests/postgres_server.py), two app processes on two loopback addresses (127.0.0.2 = host A,
127.0.0.3 = host B) with app-host.sh's flags and variables, nginx with deploy/hall/nginx.conf in front. The teacher's
browser and a student's Generate session land on A, two students' class pages on B (each cookie picked by asking
nginx where it sends it).

Checked: the app is public (no typed engine URL); the Generate session's Steps on the engine equal the prompt's
solo greedy run; the teacher's steps on A reach the students on B, and their guesses reach the teacher. Then A is
killed with guessing open: the teacher's browser reconnects to B by itself and takes the class up there (rebuilt
from the store's checkpoint) at the same step with the same text and every guess counted, the next Draw and reveal
shows them on every student's screen; the Generate session reconnects to B too, reruns by itself and replays its
link's steps, so its next Step is its next token. nginx's log: every session stuck to one host until the kill.
deploy/class.sh and deploy/nginx.conf (one machine, two app processes) hold the same flags and cookie rule.
Marker `load` (PostgreSQL, llama-server, two app processes, nginx and Chromium); `.ci/run` runs it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlencode

import psutil
import pytest

from inference.core.loader import encode_prompt
from inference.core.run import GREEDY, new_trace
from inference.lessons.classroom.store import ClassStore
from tests.browser import SKIP_REASON, chromium_available, free_port, keep_screenshot, launch, open_page, wait_idle
from tests.load_sessions import EXCEPTION_BOX, PROMPTS, generated_ids, step_interleaved
from tests.postgres_server import postgres_server, require_postgres
from tests.test_engines import IN_CI, require_llama_server

pytestmark = [pytest.mark.load, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")  # these pages' model here
PROJECT_ROOT = Path(__file__).resolve().parent.parent
HALL = PROJECT_ROOT / "deploy" / "hall"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
HOSTS = ("127.0.0.2", "127.0.0.3")  # A (the teacher's), B (the students')
STUDENTS, STEPS, MAX_NEW_TOKENS = 2, 2, 20
APP_FLAGS = ["--server.headless", "true", "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"]
APP_ENV = {"INFERENCE_LAB_PUBLIC": "1", "INFERENCE_LAB_ALLOW_LOCAL_FOLDERS": "0", "INFERENCE_LAB_ALLOW_HUB": "0"}
# Debian's nginx.conf holds the http block a deploy conf is included into; ours logs each request's cookie key and
# the app process (upstream) that served it.
MAIN_CONF = """\
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 512; }}
http {{
    log_format sticky '$msec|$inference_lab_key|$upstream_addr|$status|$request_uri';
    access_log {dir}/access.log sticky;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {dir}/inference-lab.conf;
}}
"""


def deployed_conf(path: Path, replacements: dict[str, str]) -> str:
    """A deploy conf with its addresses and ports changed (each must still be there)."""
    conf = path.read_text()
    for old, new in replacements.items():
        assert old in conf, f"{path.name} changed: no {old!r}"
        conf = conf.replace(old, new)
    return conf


def test_the_deploy_files_give_the_flags_and_settings_this_test_runs():
    script = (HALL / "app-host.sh").read_text()
    assert 'streamlit run app.py --server.headless true --server.address "${HOST_ADDRESS:?' in script
    assert "--server.port 8501 --server.fileWatcherType none --browser.gatherUsageStats false" in script
    assert (
        'INFERENCE_LAB_CLASS_DB="${CLASS_DB:?' in script and 'INFERENCE_LAB_ENGINES="llama.cpp=${ENGINE_URL' in script
    )
    one_machine = (PROJECT_ROOT / "deploy" / "class.sh").read_text()
    assert "streamlit run app.py --server.headless true --server.address 127.0.0.1 --server.port $port" in one_machine
    assert "--server.fileWatcherType none --browser.gatherUsageStats false &" in one_machine
    assert "python -m inference.engines llamacpp serve --parallel 8 --port 8080 &" in one_machine
    for name, value in APP_ENV.items():
        assert f"{name}={value}" in script and f"{name}={value}" in one_machine, name
    for conf in (HALL / "nginx.conf", PROJECT_ROOT / "deploy" / "nginx.conf"):
        text = conf.read_text()
        assert "map $cookie_inference_lab" in text and "hash $inference_lab_key consistent;" in text, conf
        assert "HttpOnly" in text  # the cookie is the teacher's key to take a class up: page scripts must not read it


def require_nginx() -> None:
    if not os.access(NGINX, os.X_OK):
        if IN_CI:
            pytest.fail("CI must install nginx (Debian: apt-get install nginx) before the tests")
        pytest.skip("nginx is not installed: apt-get install nginx (Debian) to run the class set-up test")


def wait_http(url: str, timeout_s: float, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"{what} exited with code {process.returncode}"
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{what} did not answer {url} within {timeout_s:g} s")


def started(stack: ExitStack, args: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    """A process stopped (SIGTERM, then SIGKILL) when the test ends, whatever happens."""
    handle = stack.enter_context(open(log, "w"))  # noqa: SIM115
    process = subprocess.Popen(args, cwd=PROJECT_ROOT, stdin=subprocess.DEVNULL, stdout=handle,
                               stderr=subprocess.STDOUT, env=env)  # fmt: skip

    def stop():
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()

    stack.callback(stop)
    return process


def nginx_in_front(stack: ExitStack, tmp_path: Path, conf: str) -> str:
    """nginx with `conf` included in MAIN_CONF, logging to tmp_path/access.log; its base URL."""
    nginx_port = free_port()
    assert "listen 80;" in conf, "the deploy conf changed: no 'listen 80;'"
    (tmp_path / "inference-lab.conf").write_text(conf.replace("listen 80;", f"listen 127.0.0.1:{nginx_port};"))
    user = "user root;" if os.geteuid() == 0 else ""  # workers must write the temp folders in tmp_path
    (tmp_path / "nginx.conf").write_text(MAIN_CONF.format(user=user, dir=tmp_path))
    args = [NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")]
    nginx = started(stack, [*args, "-g", "daemon off;"], tmp_path / "nginx.out")
    base = f"http://127.0.0.1:{nginx_port}"
    wait_http(base + "/_stcore/health", 30, nginx, "nginx")
    return base


def websockets_on(port: int) -> int:
    """Established connections into an app port: nginx holds one per open WebSocket (no idle upstream connections
    without `keepalive`), so the count is that process's open sessions."""
    return sum(
        1
        for c in psutil.net_connections("tcp")
        if c.laddr and c.laddr.port == port and c.status == psutil.CONN_ESTABLISHED
    )


def settled_websockets(port: int, want: int, timeout_s: float, reads: int = 4) -> int:
    """`websockets_on(port)` once it read `want` `reads` times in a row (a page's HTTP request holds an upstream
    connection for a moment); else, after `timeout_s`, what it reads then."""
    deadline, streak = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline and streak < reads:
        streak = streak + 1 if websockets_on(port) == want else 0
        time.sleep(0.5)
    return want if streak >= reads else websockets_on(port)


def access_log(path: Path) -> dict[str, list[tuple[float, str, str, str]]]:
    """{cookie key: [(logged at, app process that answered (the last of nginx's tries), status, uri), ...]}."""
    out = defaultdict(list)
    for line in path.read_text().splitlines():
        msec, key, upstream, status, uri = line.split("|", 4)
        out[key].append((float(msec), upstream.split(",")[-1].strip(), status, uri))
    return out


def websocket_upstreams(lines) -> list[str]:
    return [upstream for _, upstream, status, uri in lines if status == "101" and uri.startswith("/_stcore/stream")]


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


def solo(bundled, prompt: str, steps: int) -> list[int]:
    trace = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, prompt), MAX_NEW_TOKENS)
    return [r.token_id for r in trace.run(GREEDY, max_steps=steps)]


def test_the_teachers_host_dies_and_the_class_goes_on_from_the_same_step_on_the_other(bundled, tmp_path):
    require_postgres()
    require_llama_server()
    require_nginx()
    from playwright.sync_api import sync_playwright

    prompt = PROMPTS[0]
    expected = solo(bundled, prompt, 2 * STEPS)
    with ExitStack() as stack:
        url = stack.enter_context(postgres_server())
        engine_port = free_port()
        serve = [sys.executable, "-m", "inference.engines", "llamacpp", "serve", "--parallel", "8", "--port"]
        engine = started(stack, [*serve, str(engine_port)], tmp_path / "engine.log")
        wait_http(f"http://127.0.0.1:{engine_port}/health", 120, engine, "llamacpp serve")
        apps = [(host, free_port()) for host in HOSTS]
        processes = {}
        env = {**os.environ, **APP_ENV, "INFERENCE_LAB_CLASS_DB": url,
               "INFERENCE_LAB_ENGINES": f"llama.cpp=http://127.0.0.1:{engine_port}"}  # fmt: skip
        for host, port in apps:
            command = [sys.executable, "-m", "streamlit", "run", "app.py", *APP_FLAGS]
            command += ["--server.address", host, "--server.port", str(port)]
            processes[host] = started(stack, command, tmp_path / f"app-{host}.log", env)
        for host, port in apps:
            wait_http(f"http://{host}:{port}/_stcore/health", 120, processes[host], f"the app on {host}")
        hosts = {"10.0.0.11:8501 ": f"{apps[0][0]}:{apps[0][1]} ", "10.0.0.12:8501 ": f"{apps[1][0]}:{apps[1][1]} "}
        base = nginx_in_front(stack, tmp_path, deployed_conf(HALL / "nginx.conf", hosts))

        # 1. Cookies nginx sends to A (the teacher's and a Generate session's) and to B (the students').
        log = tmp_path / "access.log"
        a, b = (f"{host}:{port}" for host, port in apps)
        keys = {a: [], b: []}
        for i in range(200):
            key = f"browser-{i:03d}"
            keys[upstream_of(base, key, log)].append(key)
            if len(keys[a]) >= 2 and len(keys[b]) >= STUDENTS:
                break
        (teacher_key, reader_key), student_keys = keys[a][:2], keys[b][:STUDENTS]

        playwright = stack.enter_context(sync_playwright())
        browser = launch(playwright)
        stack.callback(browser.close)
        errors: list[str] = []

        # 2. A Generate session on A steps on the engine: public mode, the solo run's tokens.
        reader = browser_page(browser, base, reader_key, 1000, errors)
        query = urlencode({"prompt": prompt, "t": 0, "max": MAX_NEW_TOKENS, "engine": "llama.cpp"})
        open_page(reader, f"{base}/?{query}")
        assert (
            "Or an engine URL" not in reader.locator('[data-testid="stSidebar"]').inner_text()
        )  # INFERENCE_LAB_PUBLIC
        step_interleaved([reader], [STEPS])
        assert generated_ids(reader) == expected[:STEPS]
        assert "returned all 4,096 token probabilities" in reader.locator('[data-testid="stMain"]').inner_text()

        # 3. The teacher starts a class on A and steps twice; the students join on B.
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

        # 4. Guessing opens; every student answers on B; the teacher on A sees them counted.
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

        # 5. Host A dies without a word; the teacher's and the reader's browsers reconnect through nginx to B.
        killed_at = time.time()
        processes[HOSTS[0]].send_signal(signal.SIGKILL)
        processes[HOSTS[0]].wait(10)
        assert settled_websockets(apps[1][1], STUDENTS + 2, 120) == STUDENTS + 2, "A's browsers did not reconnect to B"
        # The new session on B reran the page (the old one stays drawn until then) and took the class up.
        wait_idle(teacher, 120_000)
        teacher.get_by_text(f"{STUDENTS} of {STUDENTS} students have answered").wait_for(timeout=60_000)
        assert generated_text(teacher) == written
        assert "· step 3" in teacher.locator('[data-testid="stMain"]').inner_text()
        keep_screenshot(teacher, "hall_teacher_taken_up_1280")
        assert store.info(code).guess_step == before_kill.guess_step

        # 6. The class goes on from there on B: the draw reveals every guess on every screen.
        teacher.get_by_role("button", name="Draw and reveal").click()
        wait_idle(teacher, 120_000)
        after = store.info(code)
        assert after.state["step"] == 3 and after.state["generated"][:2] == before_kill.state["generated"]
        assert after.state["reveal"]["answers"] == STUDENTS
        for student in students:
            student.get_by_text(f"{STUDENTS} of {STUDENTS} picked").first.wait_for(timeout=30_000)
        keep_screenshot(students[0], "hall_student_reveal_800")
        # The Generate session reran on B and replayed its link's steps: its next Steps are its next tokens.
        step_interleaved([reader], [STEPS], shown=[STEPS])
        assert generated_ids(reader) == expected
        pages = [teacher, reader, *students]
        assert not [page for page in pages if page.locator(EXCEPTION_BOX).count()] and not errors, errors[:3]

    # 7. nginx's record (sticky; a WebSocket upgrade is logged when it closes): the students only ever on B; the
    # teacher and the reader on A until the kill, then on B.
    lines = access_log(log)
    for key in student_keys:
        assert {up for _, up, _, _ in lines[key]} == {b} and websocket_upstreams(lines[key]) == [b], key
    for key in (teacher_key, reader_key):
        assert {up for at, up, _, _ in lines[key] if at < killed_at} == {a}, key
        assert websocket_upstreams(lines[key])[:1] == [a] and b in websocket_upstreams(lines[key])[1:], key
