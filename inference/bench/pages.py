"""What one Step costs the Streamlit server: its process's CPU time (user + system) per Step, over Steps pressed
in real Chromium against the real app (`python -m inference.bench.pages`, also run by
`python -m inference.bench --pages`). This, more than the model's own step, bounds how many students press Step
together on one server. Needs Debian's chromium and playwright (tests/requirements.txt); nothing is imported from
Streamlit here: the app runs as its own process, whose CPU time psutil reads.
"""

from __future__ import annotations

import psutil

from inference.core.app_process import running_app

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
CHIPS = "(document.querySelector('.token-box')?.dataset.generatedIds || '').split(',').filter(Boolean).length"
# The Speculative page's status line: "... N generated in R target passes" ("1 target pass"; one a round).
ROUNDS = "(() => { const m = document.body.innerText.match(/in (\\d+) target pass(es)?\\b/); return m ? Number(m[1]) : 0; })()"
SPEC_STEP = "Step (one round)"


def _server_cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def _idle(page) -> None:
    page.wait_for_timeout(100)
    page.wait_for_selector(IDLE, timeout=120_000)


def step_cpu(page, server: psutil.Process, steps: int) -> tuple[float, int, int]:
    """Server CPU ms per Step over `steps` Steps; returns (ms, first position, last position)."""
    first = page.evaluate(CHIPS)
    cpu0 = _server_cpu(server)
    done = 0
    for _ in range(steps):
        before = page.evaluate(CHIPS)
        page.get_by_role("button", name="Step", exact=True).click()
        try:
            page.wait_for_function(f"{CHIPS} > {before}", timeout=60_000)
        except Exception:  # the run stopped (the stop token): count what was stepped
            break
        _idle(page)
        done += 1
    return 1000 * (_server_cpu(server) - cpu0) / max(done, 1), first, page.evaluate(CHIPS)


def back_and_step_cpu(page, server: psutil.Process, pairs: int) -> tuple[float, int]:
    """Server CPU ms per rerun at the end of a long run: Back then Step, `pairs` times (a run that ended at its
    stop token before 300 cannot take more Steps; Back and Step redraw the page at its full length)."""
    position = page.evaluate(CHIPS)
    cpu0 = _server_cpu(server)
    for _ in range(pairs):
        for name, expect in (("Back", position - 1), ("Step", position)):
            page.get_by_role("button", name=name, exact=True).click()
            page.wait_for_function(f"{CHIPS} == {expect}", timeout=60_000)
            _idle(page)
    return 1000 * (_server_cpu(server) - cpu0) / (2 * pairs), position


def round_cpu(page, server: psutil.Process, rounds: int) -> tuple[float, int]:
    """Server CPU ms per Speculative round (its Step) over `rounds` rounds; returns (ms, rounds done)."""
    cpu0 = _server_cpu(server)
    done = 0
    for _ in range(rounds):
        before = page.evaluate(ROUNDS)
        page.get_by_role("button", name=SPEC_STEP, exact=True).click()
        try:
            page.wait_for_function(f"{ROUNDS} > {before}", timeout=60_000)
        except Exception:  # the run stopped: count what was stepped
            break
        _idle(page)
        done += 1
    return 1000 * (_server_cpu(server) - cpu0) / max(done, 1), done


def slider_cpu(page, server: psutil.Process, moves: int = 20) -> float:
    """Server CPU ms per Temperature slider release on the Sampling lab (each release reruns the page)."""
    slider = page.get_by_role("slider", name="Temperature").first
    cpu0 = _server_cpu(server)
    for i in range(moves):
        slider.focus()
        slider.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
        _idle(page)
    return 1000 * (_server_cpu(server) - cpu0) / moves


FLOOR_APP = "tests/apps/fragment_floor.py"  # the Stepper's buttons, a chip line and a status line; nothing else


def floor_step_cpu(steps: int = 30) -> float:
    """Server CPU ms per Step of `FLOOR_APP`, driven as Generate's Steps are: Streamlit's own cost of a Step."""
    from playwright.sync_api import sync_playwright

    with running_app(start_timeout_s=90, script=FLOOR_APP) as app, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(app.url)
        page.wait_for_selector(".token-box", state="attached", timeout=120_000)
        _idle(page)
        page.get_by_role("button", name="Step", exact=True).click()  # untimed, as Generate's first Step
        page.wait_for_function(f"{CHIPS} >= 1", timeout=60_000)
        _idle(page)
        ms, _, _ = step_cpu(page, psutil.Process(app.process.pid), steps)
        browser.close()
    return ms


def page_figures(steps: int = 30) -> dict:
    from playwright.sync_api import sync_playwright

    # The 6M storyteller, as these keys have always measured (the app's default is SmolLM2 where it is installed)
    with running_app({"INFERENCE_LAB_DEFAULT_MODEL": "storyteller-llama-6m"}, start_timeout_s=90) as app:
        url, server = app.url, psutil.Process(app.process.pid)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/?max=300&t=0.7&p=0.9&seed=1")
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
            _idle(page)
            page.get_by_role("button", name="Step", exact=True).click()  # the untimed first Step (prefill, warm-up)
            page.wait_for_function(f"{CHIPS} >= 1", timeout=120_000)
            _idle(page)
            ms, first, last = step_cpu(page, server, steps)
            out = {"page_step_server_cpu_ms": round(ms, 1), "page_step_positions": f"{first}-{last}"}
            page.get_by_role("button", name="Play", exact=True).click()  # on towards 300 tokens (or the stop token)
            page.wait_for_function("document.body.innerText.includes('stopped') || " + f"{CHIPS} >= 270",
                                   timeout=600_000)  # fmt: skip
            _idle(page)
            ms, position = back_and_step_cpu(page, server, steps // 2)
            out |= {"page_step_server_cpu_ms_300": round(ms, 1), "page_step_300_position": position}
            page.goto(f"{url}/sampling")
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
            _idle(page)
            out["page_sampling_slider_server_cpu_ms"] = round(slider_cpu(page, server), 1)
            page.goto(f"{url}/speculative?max=300&seed=1")
            page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
            _idle(page)
            page.get_by_role("button", name=SPEC_STEP, exact=True).click()  # untimed: prefill, the draft's warm-up
            page.wait_for_function(f"{ROUNDS} >= 1", timeout=120_000)
            _idle(page)
            ms, rounds = round_cpu(page, server, steps // 2)
            out |= {"page_spec_round_server_cpu_ms": round(ms, 1), "page_spec_rounds": rounds}
            browser.close()
    out["page_step_floor_server_cpu_ms"] = round(floor_step_cpu(steps), 1)
    return out


if __name__ == "__main__":
    print(page_figures())
