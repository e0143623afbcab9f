"""Every measuring button of every page, pressed once in real Chromium (issue #23's "so it stays fixed"): no
exception box, no "Traceback", no error alert but the expected ones, no progress bar left behind, and each press waits
for what its measurement draws (a chart's title, a table's header, a sentence), never only for its spinner to go.

One app process serves every page; each page opens in a fresh session, is set to its cheapest real settings through
the UI (sliders to their minimum), and its buttons are pressed; nothing is stubbed. In presenter mode the same pages
open again: results kept for every visitor (app_pages/shared/shared_results.py) must show without measuring again;
a session's or a click's results are pressed again. Screenshots at 1280x900 and 800x1000 go to $INFERENCE_LAB_SHOTS.

- `test_every_button_on_the_model_pages` (tier `browser`, normal mode): Class mode, Sampling lab, Compare,
  Constrained (its llama-server button included), Prefill vs decode, Inside one pass.
- `..._on_the_heavier_model_pages` and `..._on_the_serving_pages` (tier `clickthrough`, minutes each; run before a
  release with `python -m pytest -m clickthrough`), in both modes: KV cache, Quantization, MoE, Speculative, Cost;
  then Quantization's KV-cache types on llama-server, Serve many and Inside the engine on both models, each press
  starting llama-server (Inside the engine's cache-type comparison is Quantization's result, kept).

Left out: Serve many's vLLM replay (vLLM's start takes minutes; tests/test_serving_engine.py runs it under AppTest).
`EVERY_BUTTON_PAGES=a,b` presses only those visits; a selection that names none fails.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pytest

from inference.core.measuring import Stopwatch
from inference.core.routing import BUNDLED_MOE_NAME
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

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")  # these pages' model here

# one measurement on a busy 2-core machine (a llama-server start included)
MEASURE_TIMEOUT_MS = int(os.environ.get("EVERY_BUTTON_TIMEOUT_MS", 420_000))
MAIN = '[data-testid="stMain"]'


@dataclass
class Press:
    button: str  # the button's label, exactly
    shows: str  # text the result puts on the page (SVG text of a chart included)
    kept_for_everyone: bool = True  # False: a session's or a click's result, pressed again in presenter mode
    measured_earlier: bool = False  # the same measurement was pressed on an earlier visit: its result must show
    shown_before: bool = False  # the page already draws `shows` before the press (a "measure again" button)


@dataclass
class Visit:
    """A page, its cheapest real settings (a button pressed first and the text it draws, a model picked, sliders to
    their minimum) and its buttons in order."""

    path: str
    presses: list[Press]
    first_shows: str  # text the page draws once loaded (waited for before anything else)
    first_press: tuple[str, str] | None = None  # (button, text it draws)
    model: tuple[str, str] | None = None  # (radio option, text it draws)
    sliders: tuple[str, ...] = ()
    name: str = ""

    def setup(self, page) -> None:
        for option, shows in [self.model] if self.model else []:
            page.locator(MAIN).get_by_text(option, exact=False).first.click()
            wait_for_text(page, shows)
        for button, shows in [self.first_press] if self.first_press else []:
            page.locator(MAIN).get_by_role("button", name=button, exact=True).first.click()
            wait_for_text(page, shows)
            wait_idle(page)
        for label in self.sliders:
            slider_to_minimum(page, label)


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
        alerts = page.locator('[data-testid="stAlert"]').all_inner_texts()
        raise AssertionError(f"{text!r} never showed; the page's alerts: {alerts}") from err
    exception = page.locator('[data-testid="stException"]')
    assert exception.count() == 0, f"an exception box while waiting for {text!r}: {exception.first.inner_text()[:2000]}"


def slider_to_minimum(page, label: str) -> None:
    """Focus a slider (or select-slider) by its label and press Home: Streamlit reruns with its smallest value."""
    exact_label = page.locator('[data-testid="stWidgetLabel"]', has_text=re.compile(f"^{re.escape(label)}$"))
    slider = page.locator('[data-testid="stSlider"]', has=exact_label).get_by_role("slider").first
    wait_idle(page)  # the last slider's rerun done: a rerun still drawing can take the focus from this one
    before = slider.get_attribute("aria-valuenow")
    slider.focus()
    page.keyboard.press("Home")
    if slider.get_attribute("aria-valuenow") != before:
        page.wait_for_timeout(600)  # Streamlit sends a slider's value after a debounce: idle could come first
        wait_idle(page)


def assert_clean(page, where: str, js_errors: list | None = None) -> None:
    """No exception box, no traceback, no progress bar left running, no error alert, no JavaScript error."""
    assert page.locator('[data-testid="stException"]').count() == 0, f"{where}: an exception box"
    assert "Traceback" not in page.evaluate("() => document.body.innerText"), f"{where}: a traceback on the page"
    assert page.locator(f'{MAIN} [data-testid="stProgress"]').count() == 0, f"{where}: a progress bar left behind"
    errors = page.locator('[data-testid="stAlertContentError"]').all_inner_texts()
    assert not errors and not js_errors, f"{where}: error alerts {errors}, JavaScript errors {js_errors}"


def open_closed_sections(page) -> None:
    closed = page.locator(f"{MAIN} details:not([open]) > summary")
    for _ in range(30):  # a dozen sections at most; a heading that will not open must not loop forever
        if not closed.count():
            break
        closed.first.click()
        page.wait_for_timeout(200)
    wait_idle(page)


def press(page, step: Press, where: str) -> float:
    """Click a button, wait for its run to end and for its result; returns the seconds it took."""
    if not step.shown_before:
        shown = page.evaluate(f"() => document.querySelector('{MAIN}').textContent")
        assert step.shows not in shown, f"{where}: {step.shows!r} is shown before {step.button!r}"
    button = page.locator(MAIN).get_by_role("button", name=step.button, exact=True).first
    if not button.is_visible():  # in a closed section, which Streamlit may not even have drawn yet
        open_closed_sections(page)
    button.wait_for(state="visible")
    button.scroll_into_view_if_needed()
    with Stopwatch() as watch:
        button.click()
        wait_idle(page, MEASURE_TIMEOUT_MS)
        wait_for_text(page, step.shows)
        wait_idle(page, MEASURE_TIMEOUT_MS)
    return watch.ms / 1000


def run_visits(url: str, visits: list[Visit], modes=(False, True)) -> None:
    """Every visit in normal mode, then in presenter mode (`modes`: presenter off, on)."""
    from playwright.sync_api import sync_playwright

    assert visits, f"EVERY_BUTTON_PAGES={os.environ.get('EVERY_BUTTON_PAGES')!r} names none of these visits"
    with sync_playwright() as p:
        browser = launch(p)
        for presenter, visit in ((presenter, visit) for presenter in modes for visit in visits):
            where = f"/{visit.path} ({'presenter' if presenter else 'normal'})"
            print(where, flush=True)
            page = browser.new_page(viewport={"width": SCREENS[0][0], "height": SCREENS[0][1]})
            js_errors = []
            page.on("pageerror", lambda e, errors=js_errors: errors.append(str(e)))
            open_page(page, f"{url}/{visit.path}")
            wait_for_text(page, visit.first_shows)
            if presenter:
                toggle_presenter(page)
            visit.setup(page)
            for step in visit.presses:
                if step.measured_earlier or (presenter and step.kept_for_everyone):
                    wait_for_text(page, step.shows, timeout=60_000)  # kept from the normal-mode press
                else:
                    print(f"  {step.button}: {press(page, step, where):.1f} s", flush=True)
                assert_clean(page, f"{where} after {step.button!r}")
            assert_clean(page, where, js_errors)
            screenshot_each_size(page, f"{visit.name}_{'presenter' if presenter else 'normal'}")
            page.close()
        browser.close()


# -- the model pages ---------------------------------------------------------------------------------------------
KV_TYPES_BUTTON = f"Measure the {len(kv_precision.CONFIGS)} KV cache types on llama-server"

MODEL_PAGES = [
    Visit(
        "class",
        [
            Press("Start a class", "Class code:", kept_for_everyone=False),
            Press("Open guessing", "Guessing is open", kept_for_everyone=False),
            Press("Draw and reveal", "counted, not attributed", kept_for_everyone=False),
            Press("Another seed", "Seed 1 · step", kept_for_everyone=False),
        ],
        "Join the class",
    ),
    Visit("sampling", [Press("Sample 1,000 times", "seeded inverse-CDF draws", False)], "The pipeline, stage by stage"),
    Visit("compare", [Press("Run A and B on 20 seeds", "95% intervals")], "Over many seeds", sliders=("Seeds",)),
    Visit(
        "constrained",
        [Press("Run it on llama-server (starts it for one request)", "own timings for this request", False)],
        "Allowed tokens",  # the page opens on its first step; Play (greedy) to the end shows the llama-server part
        first_press=("Play", "The same format on llama.cpp's server"),
    ),
    Visit(
        "prefill-decode",
        [Press("Run the sweep", "What these numbers say")],
        "Run the sweep",
        sliders=("Runs per point",),
    ),
    Visit(
        "inside",
        [Press("Time the pass again", "Every part as a table", kept_for_everyone=False, shown_before=True)],
        "Every part as a table",
    ),
]

# The pages whose measurements take longest (tens of seconds each on a busy 2-core machine): the clickthrough tier.
HEAVIER_MODEL_PAGES = [
    Visit(
        "kv-cache",
        [Press("Compare with and without the cache", "Same tokens?")],
        "How big does it get for real models?",
    ),
    Visit(
        "quantization",
        [
            Press("Quantize and compare the four precisions", "What each precision saves"),
            Press("Measure the GGUF files", "GGUF bytes are the file's size"),
            Press("Measure transformers' decode rate and this machine's bandwidth", "memory delivers"),
        ],  # its KV-cache types (minutes on llama-server): SERVING_PAGES
        "The same numbers as a table",
        sliders=("New tokens",),
    ),
    Visit(
        "moe",
        [
            Press("Time the MoE, its top-1 variant and the dense model", "interleaved runs of"),
            Press("Build and measure the three models", "Random weights from a private seed"),
        ],
        "Published MoE models",
        first_press=(
            f"Load the bundled MoE model ({BUNDLED_MOE_NAME})",
            "1. Routing, live",
        ),  # the page opens on the dense model
    ),
    Visit(
        "speculative",
        [Press("Measure the sweep", "Solid: measured speed-up of each run")],
        "Press Step to run one round",
        first_press=("Step (one round)", "Measure the sweep"),  # the sweep's button sits under a run
    ),
    Visit(
        "cost",
        [
            Press("Measure again", "Per output token", kept_for_everyone=False, shown_before=True),
            Press("Measure batching", "What a million output tokens cost"),
            Press("Measure decode against context", "ms per decode step"),
        ],
        "4. Mixture of Experts",
        sliders=("Prompt tokens", "Reply tokens"),
    ),
]

# The serving pages: llama-server started for every measurement, on the bundled model and a SmolLM2-shaped one.
SMOLLM_SHAPE = ("SmolLM2-135M shape", "random weights")
INTERNALS_SLIDERS = ("Shared prefix (tokens)", "Own tokens after it", "Requests", "New tokens per turn",
                     "Turns per conversation", "Newcomer's prompt (tokens)", "Requests decoding (co-tenants)")  # fmt: skip
# ("Positions of text scored" stays at 192: the Quantization page's KV measurement, shared with Inside the engine)


def serving_presses(machine_measured_earlier: bool) -> list[Press]:
    """In page order; the batch measurement's button sits under the roofline the machine's measurement draws."""
    return [
        Press("Replay the trace: 1 slot, then 8 slots", "Each bar is one request"),
        Press("Sweep the arrival rate", "requests at each of the 5 rates"),
        Press(
            "Measure this machine (bandwidth and peak FLOP/s)",
            "GB/s memory bandwidth",
            measured_earlier=machine_measured_earlier,
        ),  # fmt: skip
        Press("Measure decode at batch 1, 2, 4, 8", "tokens that streamed while all B requests were decoding"),
        Press("Measure capacity: 1 slot, then 8", "slot: per million tokens"),
    ]


INTERNALS_PRESSES = [
    Press("Send them, cache off then on", "request sent to its one token parsed"),
    Press("Alternate two conversations", "a fresh server per row"),
    Press("Measure the stalls", "One run per setting on a fresh server"),
    # always the bundled model, under the key the Quantization page's button measured it with: shown here
    Press(
        f"Compare {len(kv_precision.CONFIGS)} cache types on the bundled model",
        "computed exactly from each type's block layout",
        measured_earlier=True,
    ),  # fmt: skip
]
SERVING_PAGES = [
    Visit(
        "quantization",
        [Press(KV_TYPES_BUTTON, "The same result as on the Inside the engine page")],
        "The same numbers as a table",
        name="quantization-kv",
    ),
    Visit(
        "serving",
        serving_presses(False),
        "5. What a million tokens costs",
        sliders=("Requests", "Requests per rate"),
        name="serving-bundled",
    ),  # fmt: skip
    Visit(
        "serving",
        serving_presses(True),
        "5. What a million tokens costs",
        model=SMOLLM_SHAPE,
        sliders=("Requests", "Requests per rate"),
        name="serving-smollm",
    ),  # fmt: skip
    Visit(
        "engine-internals",
        INTERNALS_PRESSES,
        "3. KV-cache precision",
        sliders=INTERNALS_SLIDERS,
        name="engine-internals-bundled",
    ),  # fmt: skip
    Visit(
        "engine-internals",
        INTERNALS_PRESSES,
        "3. KV-cache precision",
        model=("SmolLM2-135M shape", "Its text is nonsense"),
        sliders=INTERNALS_SLIDERS,
        name="engine-internals-smollm",
    ),  # fmt: skip
]
for visit in MODEL_PAGES + HEAVIER_MODEL_PAGES + SERVING_PAGES:
    visit.name = visit.name or visit.path


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    env = {"INFERENCE_LAB_CLASS_DB": str(tmp_path_factory.mktemp("class") / "classes.sqlite3")}
    with streamlit_server(env) as url:
        yield url


def chosen(visits: list[Visit]) -> list[Visit]:
    only = os.environ.get("EVERY_BUTTON_PAGES")  # a comma-separated subset of visit names, to work on one page
    return [v for v in visits if not only or v.name in only.split(",")]


@pytest.mark.browser
def test_every_button_on_the_model_pages(app_url):
    """Normal mode only: presenter mode on every page is checked by tests/test_pages_browser.py (and the
    clickthrough tier presses each button in both)."""
    run_visits(app_url, chosen(MODEL_PAGES), modes=(False,))


@pytest.mark.clickthrough
def test_every_button_on_the_heavier_model_pages(app_url):
    run_visits(app_url, chosen(HEAVIER_MODEL_PAGES))


@pytest.mark.clickthrough
def test_every_button_on_the_serving_pages(app_url):
    run_visits(app_url, chosen(SERVING_PAGES))
