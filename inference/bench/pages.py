"""The app as a class sees it, in Chromium against the real app in its own process (`python -m inference.bench
--pages`; Debian's chromium and playwright).

- `page_*`: the Streamlit server's CPU time (user + system) per Step, per Speculative round and per slider release, on
  the 6M storyteller; `page_step_floor_server_cpu_ms` is Streamlit's own cost of such a Step (the Stepper's buttons
  and a chip line only). This, more than the model's step, bounds how many students press Step on one server.
- `real_*` (issue #45's goals), Generate on SmolLM2-135M-Instruct: app start to the first chip painted (goal <= 15
  s), that Step alone, each later Step click to paint (goal <= 0.3 s), Play's chips per second once they flow (goal
  10); the same on llama-server's f32 GGUF of the weights (`_llamacpp`), and with `--prio 2` (`_prio2`, as root).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import psutil

from inference.core import real_model
from inference.core.app_process import running_app
from inference.core.measuring import ms_since, now
from inference.engines import llamacpp

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
CHIPS = "(document.querySelector('.token-box')?.dataset.generatedIds || '').split(',').filter(Boolean).length"
# The Speculative page's status line: "... N generated in R target passes" ("1 target pass"; one a round).
ROUNDS = "(() => { const m = document.body.innerText.match(/in (\\d+) target pass(es)?\\b/); return m ? Number(m[1]) : 0; })()"
SPEC_STEP = "Step (one round)"
FLOOR_APP = "tests/apps/fragment_floor.py"  # the Stepper's buttons, a chip line and a status line; nothing else
PLAY_PROMPT = "Write a short poem about the sea."  # a creative request: a long answer, so Play has tokens to show
PLAY_TOKENS = 48  # chips counted once they flow
STALL_S = 8.0  # no new chip for this long: the run stopped
FIRST_CHIP_WITHIN_S = 120.0  # the prefill of the typed request, on a busy machine


def _server_cpu_ms(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2]) * 1000


def _idle(page) -> None:
    page.wait_for_timeout(100)
    page.wait_for_selector(IDLE, timeout=120_000)


def _open(p, url: str, ready: str = '[data-testid="stMain"] h1'):
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(url)
    page.wait_for_selector(ready, state="attached", timeout=240_000)
    _idle(page)
    return browser, page


def _press(page, button: str, counter: str = CHIPS, timeout_ms: int = 60_000) -> float | None:
    """Press `button`: the ms from the click until `counter` grew (then idle), or None when it did not (it stopped)."""
    before, start = page.evaluate(counter), now()
    page.get_by_role("button", name=button, exact=True).click()
    try:
        page.wait_for_function(f"{counter} > {before}", timeout=timeout_ms, polling="raf")
    except Exception:  # noqa: BLE001 - playwright's timeout: the run ended
        return None
    took = ms_since(start)
    _idle(page)
    return took


def step_cpu(page, server: psutil.Process, steps: int, button: str = "Step", counter: str = CHIPS):
    """Server CPU ms per press over `steps` presses; returns (ms, counter before, counter after)."""
    first, cpu0, done = page.evaluate(counter), _server_cpu_ms(server), 0
    while done < steps and _press(page, button, counter) is not None:
        done += 1
    return (_server_cpu_ms(server) - cpu0) / max(done, 1), first, page.evaluate(counter)


def back_and_step_cpu(page, server: psutil.Process, pairs: int) -> tuple[float, int]:
    """Server CPU ms per rerun at the end of a long run: Back then Step, `pairs` times (redrawn at its full length)."""
    position, cpu0 = page.evaluate(CHIPS), _server_cpu_ms(server)
    for _ in range(pairs):
        for name, expect in (("Back", position - 1), ("Step", position)):
            page.get_by_role("button", name=name, exact=True).click()
            page.wait_for_function(f"{CHIPS} == {expect}", timeout=60_000)
            _idle(page)
    return (_server_cpu_ms(server) - cpu0) / (2 * pairs), position


def slider_cpu(page, server: psutil.Process, moves: int = 20) -> float:
    """Server CPU ms per Temperature slider release on the Sampling lab (each release reruns the page)."""
    slider, cpu0 = page.get_by_role("slider", name="Temperature").first, _server_cpu_ms(server)
    for i in range(moves):
        slider.focus()
        slider.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
        _idle(page)
    return (_server_cpu_ms(server) - cpu0) / moves


def page_figures(steps: int = 30) -> dict:
    from playwright.sync_api import sync_playwright

    # The 6M storyteller, as these keys have always measured (the app's default is SmolLM2 where it is installed)
    with (
        running_app({"INFERENCE_LAB_DEFAULT_MODEL": "storyteller-llama-6m"}, start_timeout_s=90) as app,
        sync_playwright() as p,
    ):
        server = psutil.Process(app.process.pid)
        browser, page = _open(p, f"{app.url}/?max=300&t=0.7&p=0.9&seed=1")
        _press(page, "Step", timeout_ms=120_000)  # the untimed first Step (prefill, warm-up)
        ms, first, last = step_cpu(page, server, steps)
        out = {"page_step_server_cpu_ms": round(ms, 1), "page_step_positions": f"{first}-{last}"}
        page.get_by_role("button", name="Play", exact=True).click()  # on towards 300 tokens (or the stop token)
        page.wait_for_function(f"document.body.innerText.includes('stopped') || {CHIPS} >= 270", timeout=600_000)
        _idle(page)
        ms, position = back_and_step_cpu(page, server, steps // 2)
        out |= {"page_step_server_cpu_ms_300": round(ms, 1), "page_step_300_position": position}
        page.goto(f"{app.url}/sampling")
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
        _idle(page)
        out["page_sampling_slider_server_cpu_ms"] = round(slider_cpu(page, server), 1)
        page.goto(f"{app.url}/speculative?max=300&seed=1")
        page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
        _idle(page)
        _press(page, SPEC_STEP, ROUNDS, timeout_ms=120_000)  # untimed: prefill, the draft's warm-up
        ms, before, after = step_cpu(page, server, steps // 2, SPEC_STEP, ROUNDS)
        out |= {"page_spec_round_server_cpu_ms": round(ms, 1), "page_spec_rounds": after - before}
        browser.close()
    with running_app(start_timeout_s=90, script=FLOOR_APP) as app, sync_playwright() as p:
        browser, page = _open(p, app.url, ready=".token-box")
        _press(page, "Step")  # untimed, as Generate's first Step
        out["page_step_floor_server_cpu_ms"] = round(step_cpu(page, psutil.Process(app.process.pid), steps)[0], 1)
        browser.close()
    return out


def play_tokens_per_s(page, tokens: int = PLAY_TOKENS) -> tuple[float, int]:
    """Type the creative request, press Play, count chips as they paint: (chips/s from the first new one, counted)."""
    page.get_by_label("Prompt").fill(PLAY_PROMPT)
    page.keyboard.press("Control+Enter")  # Streamlit's text area applies its value on Ctrl+Enter
    _idle(page)
    count = first_count = page.evaluate(CHIPS)
    page.get_by_role("button", name="Play", exact=True).click()
    clicked, first_time, last_time = now(), None, None
    while count - first_count < tokens:
        page.wait_for_timeout(50)
        new = page.evaluate(CHIPS)
        if new != count:
            if first_time is None:  # the first new chip: the prefill is behind, the flow starts here
                first_time, first_count = now(), new
            last_time, count = now(), new
        elif ms_since(last_time or clicked) > 1000 * (STALL_S if last_time else FIRST_CHIP_WITHIN_S):
            break
    counted = count - first_count
    if first_time is None or counted == 0:
        return 0.0, 0
    return counted / (last_time - first_time), counted


def real_generate_figures(steps: int = 8, engine_url: str | None = None, play_tokens: int = PLAY_TOKENS) -> dict:
    """The `real_*` keys for Generate on SmolLM2 in the app (or on `engine_url`: suffixed `_llamacpp`)."""
    from playwright.sync_api import sync_playwright

    env = {"INFERENCE_LAB_DEFAULT_MODEL": real_model.REAL_MODEL_NAME}
    if engine_url:
        env["INFERENCE_LAB_ENGINES"] = f"llamacpp={engine_url}"
    started, out = now(), {}
    with running_app(env, start_timeout_s=120) as app, sync_playwright() as p:
        browser, page = _open(p, f"{app.url}/?max=200&t=0.7&p=0.9&seed=1" + ("&engine=llamacpp" if engine_url else ""))
        first = _press(page, "Step", timeout_ms=240_000)
        if not engine_url and first is not None:
            out = {
                "real_first_step_s": round(first / 1000, 2),
                "real_start_to_first_step_s": round(ms_since(started) / 1000, 1),
            }
        paints = [ms for ms in (_press(page, "Step") for _ in range(steps)) if ms is not None]
        if paints and not engine_url:
            out |= {
                "real_step_paint_ms": round(statistics.median(paints), 1),
                "real_step_paint_ms_range": f"{min(paints):.0f}-{max(paints):.0f}",
                "real_step_paint_steps": len(paints),
            }
        rate, counted = play_tokens_per_s(page, play_tokens)
        suffix = "_llamacpp" if engine_url else ""
        out |= {f"real_play_tokens_per_s{suffix}": round(rate, 1), f"real_play_tokens_counted{suffix}": counted}
        browser.close()
    return out


def real_page_figures() -> dict:
    """In the app, then on llama-server's f32 GGUF of the same weights where llama-server is built."""
    out = real_generate_figures()
    if llamacpp.is_built():
        gguf = llamacpp.convert(real_model.REAL_MODEL_NAME, "f32")
        with llamacpp.serve(gguf) as server:
            out |= real_generate_figures(engine_url=server.url)
        if os.geteuid() == 0:  # elsewhere llama-server warns and keeps its normal priority: nothing to measure
            with llamacpp.serve(gguf, extra_args=["--prio", "2"]) as server:
                prio = real_generate_figures(steps=0, engine_url=server.url)
            out |= {f"{key}_prio2": value for key, value in prio.items()}
    return out


if __name__ == "__main__":  # python -m inference.bench.pages [real]: the page keys, or Generate on SmolLM2 alone
    print(json.dumps(real_page_figures() if sys.argv[1:] == ["real"] else page_figures(), indent=1))
