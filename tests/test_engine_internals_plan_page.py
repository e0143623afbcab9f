"""Inside the engine under AppTest, nothing pressed and no server started: its first result says what section 1's
requests will ask of the engine, from the sliders' values and the model's shapes, Computed exactly."""

import pytest

from inference.engines import llamacpp
from inference.lessons.engine_internals import prefix_cache, served
from tests.conftest import open_app_page

pytestmark = pytest.mark.page


def test_the_first_result_is_the_requests_plan_before_any_engine_starts(monkeypatch):
    monkeypatch.setattr(llamacpp, "is_built", lambda: True)  # the page draws its sections; no button is pressed
    at = open_app_page(
        "app_pages/engine-internals.py",
        home_first=True,
        internals_model=served.BUNDLED,
        internals_prefix=128,
        internals_suffix=8,
        internals_requests=2,
    )
    said = [m.value for m in at.markdown]
    first = next(m for m in said if m.startswith("**Before any engine starts:**"))
    assert said.index(first) < next(i for i, m in enumerate(said) if m.startswith("Three mechanisms"))  # on top
    model = served.engine_model(served.BUNDLED)
    plan = prefix_cache.request_plan(model.arithmetic, model.context, 128, 8, 2)
    assert f"send {model.name} 2 prompts of 136 tokens" in first
    assert f"**{plan.kv_bytes / 2**20:,.1f} MiB**" in first and f"{plan.warm_flops / 1e9:,.2f} GFLOP" in first
    assert any("Computed exactly" in c.value and "Bytes: layers × 2" in c.value for c in at.caption)
