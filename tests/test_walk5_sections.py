"""#46 item 11: the lesson first, the rest (sweeps, sources, theory, tables) in closed sections with a one-line
summary each; KV cache's "Sources and notes" opens closed."""

import os

import pytest

from tests.conftest import open_app_page

pytestmark = pytest.mark.page

os.environ.setdefault("INFERENCE_LAB_DEFAULT_MODEL", "storyteller-llama-6m")


def closed_sections(at) -> dict[str, bool]:
    """Each expander's label -> whether it opens expanded."""
    return {e.label: e.proto.expanded for e in at.expander}


def assert_closed_with_a_summary(sections: dict[str, bool], *expected: str):
    for word in expected:
        labels = [label for label in sections if word.lower() in label.lower()]
        assert labels, f"no closed section about {word!r} in {list(sections)}"
    for label, expanded in sections.items():
        assert not expanded, f"{label!r} opens expanded"
        assert ": " in label and len(label.split(": ", 1)[1]) > 15, f"{label!r} has no one-line summary"


def test_speculative_keeps_the_theory_sweep_rounds_and_sources_closed():
    at = open_app_page("app_pages/speculative.py", {"t": "0"}, timeout=300)
    at.button(key="spec_step").click().run()
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "theory", "sweep", "every round", "sources")


def test_kv_cache_sources_open_closed_and_the_model_tables_too():
    at = open_app_page("app_pages/kv-cache.py", timeout=300)
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "sources and notes", "every step", "every model")


def test_prefill_decode_keeps_flops_the_gpu_and_the_table_closed():
    at = open_app_page("app_pages/prefill-decode.py", timeout=300)
    at.button(key="pd_sweep").click().run()
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "arithmetic", "gpu", "sweep as a table")


def test_inside_keeps_the_published_model_and_the_parts_table_closed():
    at = open_app_page("app_pages/inside.py", timeout=300)
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "big model", "every part")


def test_cost_keeps_the_gpu_picture_closed():
    at = open_app_page("app_pages/cost.py", timeout=300)
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "gpu")


def test_constrained_keeps_the_strategies_and_the_engine_closed():
    at = open_app_page("app_pages/constrained.py", timeout=300)
    at.button(key="con_play").click().run()
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "two ways", "llama.cpp")


def test_moe_keeps_the_scale_experiment_and_the_published_models_closed():
    at = open_app_page("app_pages/moe.py", timeout=300)
    assert not at.exception
    assert_closed_with_a_summary(closed_sections(at), "at scale", "published moe")
