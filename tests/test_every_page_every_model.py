"""Every page opens with no exception on each bundled model (picked by its folder, as the sidebar does), the draft's
in presenter mode; what a page keeps below its lesson opens closed. (SmolLM2: tests/test_pages_browser.py.)"""

import pytest

from app_pages.shared.sampler_controls import MORE_LABEL
from inference.core.bundled import bundled_models
from tests.conftest import APP_FILE, PROJECT_ROOT

pytestmark = pytest.mark.page

PAGE_FILES = sorted(p.name for p in (PROJECT_ROOT / "app_pages").glob("*.py"))
MODELS = bundled_models()
IN_PRESENTER_MODE = "storyteller-draft-1m"


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("page_file", PAGE_FILES, ids=lambda name: "/" + name.removesuffix(".py"))
def test_the_page_opens_on_the_model(page_file, model, local_server):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.session_state["model_source"] = str(model.folder)
    at.session_state["presenter"] = model.name == IN_PRESENTER_MODE
    at.switch_page(f"app_pages/{page_file}").run()
    assert not at.exception, [e.value for e in at.exception]
    error = at.session_state["model_error"] if "model_error" in at.session_state else None  # noqa: SIM401 (no .get)
    assert not error, error  # a failed load would fall back to the default model and hide a broken page
    assert at.title, "the page drew its heading"
    assert any(model.name in c.value for c in at.sidebar.caption), "the sidebar names the model in use"
    assert at.toggle(key="presenter").value is (model.name == IN_PRESENTER_MODE)
    for section in at.main.expander:
        if section.label == MORE_LABEL:
            continue  # the newer samplers open where one of them is in use (Same luck's B side), to show it
        assert not section.proto.expanded, f"{section.label!r} opens expanded"


def test_the_bundled_models_are_the_three_trained_here():
    assert {m.name for m in MODELS} >= {"storyteller-llama-6m", IN_PRESENTER_MODE, "storyteller-moe-16m"}
