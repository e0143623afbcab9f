"""Generate on SmolLM2-135M-Instruct as a class sees it, in real Chromium against the real app (issue #45's goals):

- `real_start_to_first_step_s`: from starting the app's process to the first token painted after the first Step
  (Streamlit's start, the model's load, the page, the prefill); `real_first_step_s` is that first Step alone,
  click to paint. Goal: at most 15 s.
- `real_step_paint_ms`: each later Step, click to the new chip on screen (median). Goal: at most 0.3 s.
- `real_play_tokens_per_s`: Play on a creative request, chips painted per second once they flow. Goal: 10.
- `real_play_tokens_per_s_llamacpp`: the same with the page running the model on llama-server (the f32 GGUF of the
  same weights), where it is built: the engine's rate as the page shows it. `..._llamacpp_prio2`: the server started
  with `--prio 2` (its compute threads real-time, ahead of Chromium on the same cores; measured when run as root).

    python -m inference.bench.real_pages          # also run by `python -m inference.bench --pages`

Timed from outside: the app runs as its own process and nothing of Streamlit is imported here.
"""

from __future__ import annotations

import os
import statistics
import time

from inference.bench.pages import ARGS, CHIPS, CHROMIUM, _idle
from inference.core import real_model
from inference.core.app_process import running_app
from inference.engines import llamacpp

REAL_MODEL = real_model.REAL_MODEL_NAME
PLAY_PROMPT = "Write a short poem about the sea."  # a creative request: a long answer, so Play has tokens to show
PLAY_TOKENS = 48  # chips counted once they flow
STALL_S = 8.0  # no new chip for this long: the run stopped (its stop token, or max new tokens)
FIRST_CHIP_WITHIN_S = 120.0  # the prefill of the typed request, on a busy machine


def _open_generate(p, url: str, on_engine: bool):
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{url}/?max=200&t=0.7&p=0.9&seed=1" + ("&engine=llamacpp" if on_engine else ""))
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=240_000)
    _idle(page)
    return browser, page


def _step(page, timeout_ms: int = 60_000) -> float | None:
    """Press Step; the seconds from the click to the new chip on screen, or None when no chip came (the run ended)."""
    before = page.evaluate(CHIPS)
    start = time.perf_counter()
    page.get_by_role("button", name="Step", exact=True).click()
    try:
        page.wait_for_function(f"{CHIPS} > {before}", timeout=timeout_ms, polling="raf")
    except Exception:
        return None
    took = time.perf_counter() - start
    _idle(page)
    return took


def play_tokens_per_s(page, tokens: int = PLAY_TOKENS) -> tuple[float, int]:
    """Type the creative request, press Play, and count chips as they paint: (chips per second from the first new
    chip to the last one counted, chips counted)."""
    page.get_by_label("Prompt").fill(PLAY_PROMPT)
    page.keyboard.press("Control+Enter")  # Streamlit's text area applies its value on Ctrl+Enter
    _idle(page)
    start_count = page.evaluate(CHIPS)
    page.get_by_role("button", name="Play", exact=True).click()
    clicked = time.perf_counter()
    first_time = last_time = None
    first_count = last_count = start_count
    while last_count - first_count < tokens:
        page.wait_for_timeout(50)
        count, now = page.evaluate(CHIPS), time.perf_counter()
        if count != last_count:
            if first_time is None:  # the first new chip: prefill is behind us, the flow starts here
                first_time, first_count = now, count
            last_time, last_count = now, count
        elif now - (last_time or clicked) > (STALL_S if last_time else FIRST_CHIP_WITHIN_S):
            break
    counted = last_count - first_count
    if first_time is None or counted == 0:
        return 0.0, 0
    return counted / (last_time - first_time), counted


def real_generate_figures(steps: int = 8, engine_url: str | None = None, play_tokens: int = PLAY_TOKENS) -> dict:
    """The keys above for the page running the model in the app (or on `engine_url`, keys suffixed `_llamacpp`)."""
    from playwright.sync_api import sync_playwright

    env = {"INFERENCE_LAB_DEFAULT_MODEL": REAL_MODEL}
    if engine_url:
        env["INFERENCE_LAB_ENGINES"] = f"llamacpp={engine_url}"
    started = time.perf_counter()
    with running_app(env, start_timeout_s=120) as app, sync_playwright() as p:
        browser, page = _open_generate(p, app.url, on_engine=bool(engine_url))
        first = _step(page, timeout_ms=240_000)
        out = {}
        if not engine_url and first is not None:
            out = {
                "real_first_step_s": round(first, 2),
                "real_start_to_first_step_s": round(time.perf_counter() - started, 1),
            }
        paints = [took for took in (_step(page) for _ in range(steps)) if took is not None]
        if paints and not engine_url:
            out |= {
                "real_step_paint_ms": round(1000 * statistics.median(paints), 1),
                "real_step_paint_ms_range": f"{1000 * min(paints):.0f}-{1000 * max(paints):.0f}",
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
        gguf = llamacpp.convert(REAL_MODEL, "f32")
        with llamacpp.serve(gguf) as server:
            out |= real_generate_figures(engine_url=server.url)
        if os.geteuid() == 0:  # elsewhere llama-server warns and keeps its normal priority: nothing to measure
            with llamacpp.serve(gguf, extra_args=["--prio", "2"]) as server:
                prio = real_generate_figures(steps=0, engine_url=server.url)
            out |= {f"{key}_prio2": value for key, value in prio.items()}
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(real_page_figures(), indent=1))
