"""The layout rule, read from the source of every module under inference/ (module level and inside functions):
nothing imports Streamlit; core, sampling, engines and training never import a lesson; no module-level import
circle anywhere; no import of an inference module made inside a function (the old way of dodging a circle)."""

from __future__ import annotations

import pytest

from inference.core.paths import PROJECT_ROOT
from tests.source_imports import IMPORTS, MODULES, all_imports

pytestmark = pytest.mark.unit

BELOW_LESSONS = ("inference.core", "inference.sampling", "inference.engines", "inference.training")


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of the graph as [a, b, ..., a], or None (depth-first search, colours by state)."""
    state: dict[str, str] = {}
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (circle := walk(nxt)):
                return circle
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (circle := walk(node)):
            return circle
    return None


def test_every_module_is_read():
    assert {"inference.core.run", "inference.core.forward", "inference.engines.client"} <= set(MODULES)
    assert all(IMPORTS[name][0] for name in ("inference.core.run", "inference.lessons.speculative.run"))


def test_nothing_under_inference_imports_streamlit():
    offenders = sorted(name for name in MODULES if any(m.split(".")[0] == "streamlit" for m in all_imports(name)))
    assert offenders == []


def test_core_sampling_engines_and_training_never_import_a_lesson():
    offenders = {
        name: sorted(m for m in all_imports(name) if m.startswith("inference.lessons"))
        for name in MODULES
        if name.startswith(BELOW_LESSONS)
    }
    assert {name: lessons for name, lessons in offenders.items() if lessons} == {}


def test_there_is_no_module_level_import_circle():
    graph = {name: {m for m in IMPORTS[name][0] if m in MODULES and m != name} for name in MODULES}
    circle = find_circle(graph)
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_no_inference_module_is_imported_inside_a_function():
    """A function-level import of our own code hides a circle or a dependency; third-party libraries loaded only
    when needed (torchao, huggingface_hub) are fine."""
    offenders = sorted(
        {
            f"{MODULES[name].relative_to(PROJECT_ROOT)}:{line}"
            for name in MODULES
            for line, module in IMPORTS[name][1]
            if module.split(".")[0] == "inference"
        }
    )
    assert offenders == []


def test_the_circle_finder_finds_a_circle_and_names_it():
    """The rule's own check can fail: a -> b -> c -> a is found and printed in order."""
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
