"""The class set-up of docs/CLASSROOM.md, run as written: `llamacpp serve --parallel 8`, two app processes with
deploy/class.sh's flags and variables, and nginx (Debian's) with deploy/nginx.conf, only its ports changed; browser
sessions go through nginx only, everything on 127.0.0.1.

Checked: every session stays on one app process (nginx's access log: one upstream per cookie) and its WebSocket
upgrades (101); every Step's tokens equal the prompt's solo greedy run; the app is public (no typed engine URL) on
loopback. Then one app process is killed: its sessions reconnect by themselves through nginx to the other (a new
session that reruns the page and replays the link's steps: their next Step is their next token), and the other
process's sessions go on untouched. Marker `load` (two app processes, nginx, llama-server and Chromium); `.ci/run`
runs it. tests/test_two_hosts.py uses the nginx helpers here.
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
from tests.browser import SKIP_REASON, chromium_available, free_port, launch, wait_idle
from tests.load_sessions import EXCEPTION_BOX, PROMPTS, generated_ids, page_state, step_interleaved
from tests.test_engines import IN_CI, require_llama_server

pytestmark = [pytest.mark.load, pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)]

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")  # these pages' model here
PROJECT_ROOT = Path(__file__).resolve().parent.parent
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
STEPS_BEFORE, STEPS_AFTER, MAX_NEW_TOKENS = 2, 2, 20
# deploy/class.sh's app command and variables, checked below; the test runs exactly these.
CLASS_APP_FLAGS = ["--server.headless", "true", "--server.address", "127.0.0.1", "--server.fileWatcherType", "none",
                   "--browser.gatherUsageStats", "false"]  # fmt: skip
CLASS_ENV = {"INFERENCE_LAB_ALLOW_LOCAL_FOLDERS": "0", "INFERENCE_LAB_ALLOW_HUB": "0", "INFERENCE_LAB_PUBLIC": "1"}
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


def require_nginx() -> None:
    if not os.access(NGINX, os.X_OK):
        if IN_CI:
            pytest.fail("CI must install nginx (Debian: apt-get install nginx) before the tests")
        pytest.skip("nginx is not installed: apt-get install nginx (Debian) to run the class set-up tests")


def test_the_class_script_still_gives_the_flags_and_settings_this_test_runs():
    text = (PROJECT_ROOT / "deploy" / "class.sh").read_text()
    assert "streamlit run app.py --server.headless true --server.address 127.0.0.1 --server.port $port" in text
    assert "--server.fileWatcherType none --browser.gatherUsageStats false &" in text
    assert "python -m inference.engines llamacpp serve --parallel 8 --port 8080 &" in text
    assert all(f"{name}={value}" in text for name, value in CLASS_ENV.items())
    for doc in (PROJECT_ROOT / "README.md", PROJECT_ROOT / "docs" / "CLASSROOM.md"):
        assert "deploy/nginx.conf" in doc.read_text() and "deploy/class.sh" in doc.read_text(), doc.name


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


def solo(bundled, prompt: str, steps: int) -> list[int]:
    trace = new_trace(bundled.model, bundled.tokenizer, encode_prompt(bundled.tokenizer, prompt), MAX_NEW_TOKENS)
    return [r.token_id for r in trace.run(GREEDY, max_steps=steps)]


def test_a_class_behind_the_deployed_nginx_is_sticky_exact_and_survives_losing_an_app_process(bundled, tmp_path):
    require_llama_server()
    require_nginx()
    from playwright.sync_api import sync_playwright

    expected = {p: solo(bundled, p, STEPS_BEFORE + STEPS_AFTER) for p in PROMPTS}
    engine_port, app_ports = free_port(), [free_port(), free_port()]
    with ExitStack() as stack:
        # 1. deploy/class.sh's commands, their ports changed, behind deploy/nginx.conf.
        serve = [sys.executable, "-m", "inference.engines", "llamacpp", "serve", "--parallel", "8", "--port"]
        engine = started(stack, [*serve, str(engine_port)], tmp_path / "engine.log")
        wait_http(f"http://127.0.0.1:{engine_port}/health", 120, engine, "llamacpp serve")
        env = {**os.environ, **CLASS_ENV, "INFERENCE_LAB_ENGINES": f"llama.cpp=http://127.0.0.1:{engine_port}"}
        apps = {}
        for port in app_ports:
            command = [sys.executable, "-m", "streamlit", "run", "app.py", *CLASS_APP_FLAGS, "--server.port", str(port)]
            apps[port] = started(stack, command, tmp_path / f"app-{port}.log", env)
        for port, app in apps.items():
            wait_http(f"http://127.0.0.1:{port}/_stcore/health", 120, app, f"the app on port {port}")
        ports = {"127.0.0.1:8501": f"127.0.0.1:{app_ports[0]}", "127.0.0.1:8502": f"127.0.0.1:{app_ports[1]}"}
        base = nginx_in_front(stack, tmp_path, deployed_conf(PROJECT_ROOT / "deploy" / "nginx.conf", ports))

        playwright = stack.enter_context(sync_playwright())
        browser = launch(playwright)
        stack.callback(browser.close)
        errors: list[str] = []

        # 2. Sessions through nginx until each app process has one (the cookie is random).
        sessions: dict[int, list[tuple[object, str]]] = {port: [] for port in app_ports}
        for prompt in PROMPTS:
            if all(sessions.values()):
                break
            before = {port: websockets_on(port) for port in app_ports}
            page = browser.new_context(viewport={"width": 1000, "height": 800}).new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            query = urlencode({"prompt": prompt, "t": 0, "max": MAX_NEW_TOKENS, "engine": "llama.cpp"})
            page.goto(f"{base}/?{query}", timeout=240_000)
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
            wait_idle(page, 240_000)
            # Poll: the new socket can show in the kernel's table a moment after the page is idle.
            deadline = time.monotonic() + 30
            while True:
                grown = [port for port in app_ports if websockets_on(port) == before[port] + 1]
                if len(grown) == 1 or time.monotonic() > deadline:
                    break
                time.sleep(0.25)
            assert len(grown) == 1, f"a new session should open one WebSocket on one app process: {before}, {grown}"
            sessions[grown[0]].append((page, prompt))
        assert all(sessions.values()), f"{len(PROMPTS)} sessions all landed on one process"
        everyone = [item for port in app_ports for item in sessions[port]]
        sidebar = everyone[0][0].locator('[data-testid="stSidebar"]').inner_text()
        assert "Or an engine URL" not in sidebar, "INFERENCE_LAB_PUBLIC=1: a visitor must not type engine URLs"

        # 3. Every session steps; its tokens equal the solo run.
        step_interleaved([page for page, _ in everyone], [STEPS_BEFORE] * len(everyone))
        for page, prompt in everyone:
            assert generated_ids(page) == expected[prompt][:STEPS_BEFORE], prompt
        assert "returned all 4,096 token probabilities" in everyone[0][0].locator('[data-testid="stMain"]').inner_text()

        keys = {
            id(page): {c["name"]: c["value"] for c in page.context.cookies()}["inference_lab"] for page, _ in everyone
        }

        # 4. One app process dies without a word.
        killed, survivor = app_ports
        killed_at = time.time()
        apps[killed].send_signal(signal.SIGKILL)
        apps[killed].wait(10)
        moved = sessions[killed]
        # Streamlit's frontend reconnects by itself; nginx sends it to the survivor: a fresh session there.
        count = settled_websockets(survivor, len(everyone), 120)
        if count != len(everyone):  # say what each moved page shows
            states = [
                f"{prompt!r}: {page_state(page)}; {page.locator('[role=dialog]').all_inner_texts()}"
                for page, prompt in moved
            ]
            pytest.fail(
                f"the killed process's sessions did not reconnect: {count} WebSockets on the survivor for "
                f"{len(everyone)} sessions; the moved pages: {states}"
            )
        for page, _ in moved:
            wait_idle(page, 120_000)
            assert page.locator(EXCEPTION_BOX).count() == 0
        # The reconnected pages still show what they drew (the frontend keeps its elements).
        for page, prompt in everyone:
            assert generated_ids(page) == expected[prompt][:STEPS_BEFORE], prompt

        # 5. Everyone steps again and goes on from its steps: a moved page reruns by itself on reconnect
        # (app_pages/shared/reconnect.py) and its new session replays the link's steps (the URL mirrors them).
        step_pages = [page for page, _ in sessions[survivor]] + [page for page, _ in moved]
        step_interleaved(step_pages, [STEPS_AFTER] * len(step_pages), shown=[STEPS_BEFORE] * len(step_pages))
        for page, prompt in everyone:
            assert generated_ids(page) == expected[prompt][: STEPS_BEFORE + STEPS_AFTER], prompt
        assert not [page for page, _ in everyone if page.locator(EXCEPTION_BOX).count()] and not errors, errors[:3]

    # 6. nginx's record: before the kill each session on one app process (sticky), every WebSocket upgraded (101):
    # the survivor's sessions only ever on the survivor, the moved ones on the killed process, then the survivor.
    log = access_log(tmp_path / "access.log")
    by_port = {port: f"127.0.0.1:{port}" for port in app_ports}
    for port in app_ports:
        for page, prompt in sessions[port]:
            lines = log[keys[id(page)]]
            before = {upstream for at, upstream, _, _ in lines if at < killed_at}
            assert before == {by_port[port]}, (prompt, before)
            sockets = websocket_upstreams(lines)
            if port == survivor:
                assert {upstream for _, upstream, _, _ in lines} == {by_port[survivor]}, prompt
                assert sockets == [by_port[survivor]], (prompt, sockets)
            else:
                assert sockets[:1] == [by_port[killed]] and by_port[survivor] in sockets[1:], (prompt, sockets)
