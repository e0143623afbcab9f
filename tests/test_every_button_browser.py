"""Every measuring button of every page, pressed once in real Chromium, then every page again in presenter mode
(issue #23's "so it stays fixed"): no exception box, no "Traceback", no error alert but the expected ones, no
progress bar left behind, and each press waits for what its measurement draws (a chart's title, a table's header,
a caption's sentence), never only for its spinner to go.

One app process serves every page. Each page opens in a fresh session (a `goto`), is set to its cheapest real
settings through the UI (sliders to their minimum), and its buttons are pressed; nothing is stubbed. Presenter
mode then opens the same pages with the same settings: results kept for every visitor
(app_pages/shared/shared_results.py) must show there without measuring again; results a session or a click
holds (Sampling lab's draws, Inside's timing, Cost's answer, Constrained's llama-server run, a class) are pressed
again. Full-page screenshots of every page at 1280x900 and 800x1000 in both modes go to $INFERENCE_LAB_SHOTS
when it is set (none otherwise), never the repo.

Three tests, split by page and cost (CI runs the suite in ~31 of 45 minutes; this file's share of the browser
tier must stay within ~8, and the two heavier ones, 14 and ~10 minutes busy, do not fit: they are their own tier,
`clickthrough`, which neither the README's test command nor .ci/run runs; run it before a release). On a busy
2-core machine the browser test takes several minutes, and the Quantization page's KV-cache types alone several
more:
- `test_every_button_on_the_model_pages` (tier `browser`): Generate, Start here, Class mode, Sampling lab, Compare,
  Constrained (its llama-server button included), Prefill vs decode, Inside one pass.
- `test_every_button_on_the_heavier_model_pages` (tier `clickthrough`, `python -m pytest -m clickthrough`): KV cache,
  Quantization (the comparison and the GGUF files), Mixture of Experts, Speculative, Cost.
- `test_every_button_on_the_serving_pages` (tier `clickthrough`): Quantization's KV-cache types on llama-server (minutes),
  then Serve many and Inside the engine, every button on both models on the engine (the bundled model and the
  SmolLM2-135M shape), each press starting llama-server; Inside the engine's cache-type comparison is the same
  measurement as Quantization's (one result key, always the bundled model), so there it must show, kept.

Left out, and where they are covered:
- Serve many's "Replay the trace on llama.cpp and vLLM": vLLM's own start takes about two minutes;
  tests/test_serving_engine.py runs that section under AppTest against a real vLLM. Its llama.cpp half is the
  same replay as section 2's, which is pressed here.
- Generate's and the MoE page's Step/Play and the sidebar's model buttons are not measurements (tests/test_browser.py,
  tests/test_moe_page.py, tests/test_generate_page.py drive them); the MoE page's "Load the bundled MoE" is
  pressed here, since its measuring buttons appear only after it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from inference.lessons.engine_internals import kv_precision
from tests.browser import (
    SCREENS,
    SKIP_REASON,
    chromium_available,
    launch,
    open_page,
    screenshot_each_size,
    streamlit_server,
    toggle_presenter,
    wait_idle,
)

pytestmark = pytest.mark.skipif(not chromium_available(), reason=SKIP_REASON)  # tiers per test below: two costs

# Written for the 6M storyteller's speed and token ids: it is these pages' default model here (a new session
# opens on SmolLM2-135M-Instruct otherwise; tests/test_default_model_page.py covers that).
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

MEASURE_TIMEOUT_MS = int(
    os.environ.get("EVERY_BUTTON_TIMEOUT_MS", 420_000)
)  # one measurement on a busy 2-core machine (a llama-server start included)
MAIN = '[data-testid="stMain"]'


@dataclass
class Press:
    """One button and what its result draws."""

    button: str  # the button's label, exactly
    shows: str  # text the result puts on the page (SVG text of a chart included)
    kept_for_everyone: bool = True  # False: a session's or a click's result, pressed again in presenter mode
    measured_earlier: bool = False  # the same measurement was pressed on an earlier visit: its result must show
    shown_before: bool = False  # the page already draws `shows` before the press (a "measure again" button)
    errors: tuple[str, ...] = ()  # error alerts this press may show (one expected sentence each)


@dataclass
class Visit:
    """A page, how to put it in its cheapest real settings, and its buttons in order."""

    path: str
    name: str
    presses: list[Press] = field(default_factory=list)
    setup: Callable | None = None  # (page) -> None: sliders to their minimum, a model picked, ...
    first_shows: str | None = None  # text the page draws once loaded (waited for before anything else)


# -- helpers -------------------------------------------------------------------------------------------------
def main_text(page) -> str:
    return page.evaluate(f"() => document.querySelector('{MAIN}').textContent")


def info_lines(page) -> list[str]:
    """The page's st.info / st.warning / st.error texts (what a page says instead of a result)."""
    return page.locator('[data-testid="stAlert"]').all_inner_texts()


def wait_for_text(page, text: str, timeout: float = MEASURE_TIMEOUT_MS) -> None:
    """Wait until the main area shows `text`; an exception box ends the wait at once, and fails."""
    try:
        page.wait_for_function(
            """t => document.querySelector('[data-testid="stException"]')
                   || document.querySelector('[data-testid="stMain"]').textContent.includes(t)""",
            arg=text,
            timeout=timeout,
        )
    except Exception as err:  # say what never came, and what the page said instead
        raise AssertionError(f"{text!r} never showed; the page's info lines: {info_lines(page)}") from err
    exception = page.locator('[data-testid="stException"]')
    assert exception.count() == 0, f"an exception box while waiting for {text!r}: {exception.first.inner_text()[:2000]}"


def slider_to_minimum(page, label: str) -> None:
    """Focus a slider (or select-slider) by its label and press Home: Streamlit reruns with its smallest value."""
    # by the label's whole text: a name match on "Requests" also found "Arrival rate λ (requests/s)"
    exact_label = page.locator('[data-testid="stWidgetLabel"]', has_text=re.compile(f"^{re.escape(label)}$"))
    slider = page.locator('[data-testid="stSlider"]', has=exact_label).get_by_role("slider").first
    wait_idle(page)  # the last slider's rerun done: a rerun still drawing can take the focus from this one
    before = slider.get_attribute("aria-valuenow")
    slider.focus()
    page.keyboard.press("Home")
    if slider.get_attribute("aria-valuenow") != before:
        # Streamlit sends a slider's new value after a short debounce: waiting for idle at once could pass before
        # that rerun began, and the server kept the old value (seen: co-tenants 2 on the server, 1 on screen)
        page.wait_for_timeout(600)
        wait_idle(page)


def pick_radio(page, option: str) -> None:
    page.locator(MAIN).get_by_text(option, exact=False).first.click()
    wait_idle(page)


def assert_clean(page, where: str, allowed_errors: tuple[str, ...] = (), js_errors: list | None = None) -> None:
    """No exception box, no traceback, no progress bar left running, no error alert but an allowed one."""
    assert page.locator('[data-testid="stException"]').count() == 0, f"{where}: an exception box"
    text = page.evaluate("() => document.body.innerText")
    assert "Traceback" not in text, f"{where}: a traceback on the page"
    assert page.locator(f'{MAIN} [data-testid="stProgress"]').count() == 0, f"{where}: a progress bar left behind"
    for alert in page.locator('[data-testid="stAlertContentError"]').all():
        message = alert.inner_text()
        assert any(a in message for a in allowed_errors), f"{where}: error alert {message!r}"
    if js_errors:
        raise AssertionError(f"{where}: JavaScript errors {js_errors}")


def open_closed_sections(page) -> None:
    """Open every closed section of the page as a visitor would, one click on each heading."""
    closed = page.locator(f"{MAIN} details:not([open]) > summary")
    for _ in range(30):  # a page has a dozen sections at most; a heading that will not open must not loop forever
        if not closed.count():
            break
        closed.first.click()
        page.wait_for_timeout(200)
    wait_idle(page)


def press(page, step: Press, where: str) -> float:
    """Click a button, wait for its run to end and for its result; returns the seconds it took."""
    if not step.shown_before:
        assert step.shows not in main_text(page), f"{where}: {step.shows!r} is shown before {step.button!r}"
    button = page.locator(MAIN).get_by_role("button", name=step.button, exact=True).first
    if not button.is_visible():  # in a closed section (#46 item 11), which Streamlit may not even have drawn yet
        open_closed_sections(page)
    button.wait_for(state="visible")
    button.scroll_into_view_if_needed()
    started = time.perf_counter()
    button.click()
    page.wait_for_timeout(300)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=MEASURE_TIMEOUT_MS)
    wait_for_text(page, step.shows)
    wait_idle(page, MEASURE_TIMEOUT_MS)
    failed = [a.inner_text() for a in page.locator('[data-testid="stAlertContentError"]').all()]
    assert not [f for f in failed if not any(e in f for e in step.errors)], f"{where}, {step.button!r}: {failed}"
    return time.perf_counter() - started


def run_visits(url: str, visits: list[Visit], browser, modes=(False, True)) -> dict[str, float]:
    """Every visit in normal mode, then in presenter mode (`modes`: presenter off, on); returns seconds per page and
    mode."""
    seconds = {}
    for presenter in modes:
        mode = "presenter" if presenter else "normal"
        for visit in visits:
            started = time.perf_counter()
            where = f"/{visit.path} ({mode})"
            print(where, flush=True)
            context = browser.new_context(viewport={"width": SCREENS[0][0], "height": SCREENS[0][1]})
            page = context.new_page()
            js_errors = []
            page.on("pageerror", lambda e, errors=js_errors: errors.append(str(e)))
            open_page(page, f"{url}/{visit.path}")
            if visit.first_shows:
                wait_for_text(page, visit.first_shows)
            if presenter:
                toggle_presenter(page)
            if visit.setup:
                visit.setup(page)
            allowed = ()
            for step in visit.presses:
                allowed += step.errors
                if step.measured_earlier or (presenter and step.kept_for_everyone):
                    wait_for_text(page, step.shows, timeout=60_000)  # kept from the normal-mode press
                else:
                    print(f"  {step.button}: {press(page, step, where):.1f} s", flush=True)
                assert_clean(page, f"{where} after {step.button!r}", allowed)
            assert_clean(page, where, allowed, js_errors)
            screenshot_each_size(page, f"{visit.name}_{mode}")
            context.close()
            seconds[f"{visit.name} {mode}"] = time.perf_counter() - started
    return seconds


# -- the model pages ---------------------------------------------------------------------------------------------
def compare_setup(page) -> None:
    slider_to_minimum(page, "Seeds")


def prefill_setup(page) -> None:
    slider_to_minimum(page, "Runs per point")


def quantization_setup(page) -> None:
    slider_to_minimum(page, "New tokens")  # applied at once (no form any more)


def cost_setup(page) -> None:
    slider_to_minimum(page, "Prompt tokens")
    slider_to_minimum(page, "Reply tokens")


def moe_setup(page) -> None:
    """The MoE page opens on the dense model: one click loads the bundled MoE, whose sections hold the buttons."""
    page.locator(MAIN).get_by_role("button", name="Load the bundled MoE", exact=False).click()
    wait_for_text(page, "1. Routing, live")
    wait_idle(page)


def speculative_setup(page) -> None:
    """One round (Step) makes the run the sweep's button sits under."""
    page.locator(MAIN).get_by_role("button", name="Step (one round)", exact=True).click()
    wait_for_text(page, "Measure the sweep")
    wait_idle(page)


def constrained_setup(page) -> None:
    """Play the JSON preset to its end (greedy): the llama-server comparison appears under the finished run."""
    page.locator(MAIN).get_by_role("button", name="Play", exact=True).click()
    wait_for_text(page, "The same format on llama.cpp's server")
    wait_idle(page)


KV_TYPES_BUTTON = f"Measure the {len(kv_precision.CONFIGS)} KV cache types on llama-server"

MODEL_PAGES = [
    Visit("", "generate", first_shows="the choice about to be made"),
    Visit("start", "start", first_shows="Then: making it cheaper"),
    Visit(
        "class",
        "class",
        [
            Press("Start a class", "Class code:", kept_for_everyone=False),
            Press("Open guessing", "Guessing is open", kept_for_everyone=False),
            Press("Draw and reveal", "counted, not attributed", kept_for_everyone=False),
            Press("Another seed", "Seed 1 · step", kept_for_everyone=False),
        ],
        first_shows="Join the class",
    ),
    Visit(
        "sampling",
        "sampling",
        [Press("Sample 1,000 times", "seeded inverse-CDF draws", kept_for_everyone=False)],
        first_shows="The pipeline, stage by stage",
    ),
    Visit(
        "compare",
        "compare",
        [Press("Run A and B on 20 seeds", "95% intervals")],
        setup=compare_setup,
        first_shows="Over many seeds",
    ),
    Visit(
        "constrained",
        "constrained",
        [Press("Run it on llama-server (starts it for one request)", "own timings for this request", False)],
        setup=constrained_setup,
        first_shows="Allowed tokens",  # the page opens on its first step
    ),
    Visit(
        "prefill-decode",
        "prefill-decode",
        [Press("Run the sweep", "What these numbers say")],
        setup=prefill_setup,
        first_shows="Run the sweep",
    ),
    Visit(
        "inside",
        "inside",
        [Press("Time the pass again", "Every part as a table", kept_for_everyone=False, shown_before=True)],
        first_shows="Every part as a table",
    ),
]

# The pages whose measurements take longest (tens of seconds each on a busy 2-core machine): the clickthrough tier.
HEAVIER_MODEL_PAGES = [
    Visit(
        "kv-cache",
        "kv-cache",
        [Press("Compare with and without the cache", "Same tokens?")],
        first_shows="How big does it get for real models?",
    ),
    Visit(
        "quantization",
        "quantization",
        [
            Press("Quantize and compare the four precisions", "What each precision saves"),
            Press("Measure the GGUF files", "GGUF bytes are the file's size"),
            Press("Measure transformers' decode rate and this machine's bandwidth", "memory delivers"),
        ],  # its KV-cache types button (minutes on llama-server) is pressed in SERVING_PAGES, by
        # test_every_button_on_the_serving_pages (tier clickthrough)
        setup=quantization_setup,
        first_shows="The same numbers as a table",
    ),
    Visit(
        "moe",
        "moe",
        [
            Press("Time the MoE, its top-1 variant and the dense model", "interleaved runs of"),
            Press("Build and measure the three models", "Random weights from a private seed"),
        ],
        setup=moe_setup,
        first_shows="Published MoE models",
    ),
    Visit(
        "speculative",
        "speculative",
        [Press("Measure the sweep", "Solid: measured speed-up of each run")],
        setup=speculative_setup,
        first_shows="Press Step to run one round",
    ),
    Visit(
        "cost",
        "cost",
        [
            Press("Measure again", "Per output token", kept_for_everyone=False, shown_before=True),
            Press("Measure batching", "What a million output tokens cost"),
            Press("Measure decode against context", "ms per decode step"),
        ],
        setup=cost_setup,
        first_shows="4. Mixture of Experts",
    ),
]


# -- the serving pages: llama-server started for every measurement ------------------------------------------
SMOLLM_SHAPE = "SmolLM2-135M shape"  # the radio option naming the memory-bound random-weight model


def serving_setup(model: str | None) -> Callable:
    def setup(page) -> None:
        if model:
            pick_radio(page, model)
            wait_for_text(page, "random weights")
        slider_to_minimum(page, "Requests")
        slider_to_minimum(page, "Requests per rate")

    return setup


def internals_setup(model: str | None) -> Callable:
    def setup(page) -> None:
        if model:
            pick_radio(page, model)
            wait_for_text(page, "Its text is nonsense")
        for label in (
            "Shared prefix (tokens)",
            "Own tokens after it",
            "Requests",
            "New tokens per turn",
            "Turns per conversation",
            "Newcomer's prompt (tokens)",
            "Requests decoding (co-tenants)",
        ):  # "Positions of text scored" stays at 192: the Quantization page's KV measurement, shared with it
            slider_to_minimum(page, label)

    return setup


def serving_presses(machine_measured_earlier: bool) -> list[Press]:
    """In page order; the batch measurement's button sits under the roofline the machine's measurement draws."""
    return [
        Press("Replay the trace: 1 slot, then 8 slots", "Each bar is one request"),
        Press("Sweep the arrival rate", "requests at each of the 5 rates"),
        Press(
            "Measure this machine (bandwidth and peak FLOP/s)",
            "GB/s memory bandwidth",
            measured_earlier=machine_measured_earlier,
        ),
        Press("Measure decode at batch 1, 2, 4, 8", "tokens that streamed while all B requests were decoding"),
        Press("Measure capacity: 1 slot, then 8", "slot: per million tokens"),
    ]


def internals_presses() -> list[Press]:
    return [
        Press("Send them, cache off then on", "request sent to its one token parsed"),
        Press("Alternate two conversations", "a fresh server per row"),
        Press("Measure the stalls", "One run per setting on a fresh server"),
        # always the bundled model, under the key the Quantization page's button measured it with: shown here
        Press(
            f"Compare {len(kv_precision.CONFIGS)} cache types on the bundled model",
            "computed exactly from each type's block layout",
            measured_earlier=True,
        ),
    ]


SERVING_PAGES = [
    Visit(
        "quantization",
        "quantization-kv",
        [Press(KV_TYPES_BUTTON, "The same result as on the Inside the engine page")],
        first_shows="The same numbers as a table",
    ),
    Visit(
        "serving",
        "serving-bundled",
        serving_presses(machine_measured_earlier=False),
        setup=serving_setup(None),
        first_shows="5. What a million tokens costs",
    ),
    Visit(
        "serving",
        "serving-smollm",
        serving_presses(machine_measured_earlier=True),  # one machine: its roof is measured once
        setup=serving_setup(SMOLLM_SHAPE),
        first_shows="5. What a million tokens costs",
    ),
    Visit(
        "engine-internals",
        "engine-internals-bundled",
        internals_presses(),
        setup=internals_setup(None),
        first_shows="3. KV-cache precision",
    ),
    Visit(
        "engine-internals",
        "engine-internals-smollm",
        internals_presses(),
        setup=internals_setup(SMOLLM_SHAPE),
        first_shows="3. KV-cache precision",
    ),
]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    env = {"INFERENCE_LAB_CLASS_DB": str(tmp_path_factory.mktemp("class") / "classes.sqlite3")}
    with streamlit_server(env) as url:
        yield url


def run_and_report(app_url, visits, modes=(False, True)):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        try:
            seconds = run_visits(app_url, visits, browser, modes)
        finally:
            browser.close()
    print("seconds per page:", {k: round(v, 1) for k, v in seconds.items()})


def chosen(visits: list[Visit]) -> list[Visit]:
    only = os.environ.get("EVERY_BUTTON_PAGES")  # a comma-separated subset of visit names, to work on one page
    picked = [v for v in visits if not only or v.name in only.split(",")]
    if not picked:
        pytest.skip(f"EVERY_BUTTON_PAGES={only!r} names none of these visits: nothing was checked")
    return picked


@pytest.mark.browser
def test_every_button_on_the_model_pages(app_url):
    """In normal mode: every page opens in presenter mode on every bundled model (tests/test_every_page_every_model.py)
    and at 800 px (tests/test_narrow_presenter_browser.py); the clickthrough tier presses each button in both."""
    run_and_report(app_url, chosen(MODEL_PAGES), modes=(False,))


@pytest.mark.clickthrough
def test_every_button_on_the_heavier_model_pages(app_url):
    run_and_report(app_url, chosen(HEAVIER_MODEL_PAGES))


@pytest.mark.clickthrough
def test_every_button_on_the_serving_pages(app_url):
    run_and_report(app_url, chosen(SERVING_PAGES))
