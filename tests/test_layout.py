"""inference/ is plain Python: Streamlit cannot come in through a library it imports (tests/test_layout_rule.py
checks its own imports); a lesson's figure module imports no other lesson's figures."""

import functools
import importlib.metadata
import re
import sys

import pytest

from tests.source_imports import INFERENCE, MODULES, all_imports

pytestmark = pytest.mark.unit

LESSONS = INFERENCE / "lessons"


def requirement_name(requirement: str) -> str:
    """`numpy>=1.17; extra == "x"` -> numpy (normalised as distribution names are)."""
    return re.split(r"[\s;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


@functools.cache  # each root's walk passes through the same few (torch, numpy, ...)
def installed_requirements(distribution: str) -> list[str]:
    """What this distribution requires and is installed here, extras included (an optional import runs then)."""
    found = []
    for requirement in importlib.metadata.requires(distribution) or []:
        try:
            found.append(importlib.metadata.distribution(requirement_name(requirement)).metadata["Name"])
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def streamlit_path(start: str) -> list[str] | None:
    """[start, ..., streamlit] through installed requirements, or None (depth first)."""
    seen, stack = set(), [[start]]
    while stack:
        path = stack.pop()
        name = requirement_name(path[-1])
        if name == "streamlit":
            return path
        if name in seen:
            continue
        seen.add(name)
        stack.extend(path + [nxt] for nxt in installed_requirements(path[-1]))
    return None


def test_no_library_inference_imports_brings_streamlit_in():
    """No third-party package a module under inference/ imports requires Streamlit, directly or through what it
    requires (read from the packages' metadata: importing them all took 10 s)."""
    roots = {name.split(".")[0] for module in MODULES for name in all_imports(module)}
    third_party = sorted(roots - set(sys.stdlib_module_names) - {"inference", "__future__"})
    assert {"torch", "transformers", "plotly", "pandas", "httpx"} <= set(third_party)
    distributions = importlib.metadata.packages_distributions()
    # llama.cpp's converter classes, imported from its checkout by engines/convert_custom_bpe.py, are no distribution
    assert [root for root in third_party if root not in distributions] == ["conversion"]
    paths = {root: streamlit_path(dist) for root in third_party for dist in distributions.get(root, [])}
    assert {root: path for root, path in paths.items() if path} == {}
    assert streamlit_path("streamlit") == ["streamlit"]  # the walk can find it


def figure_imports(module: str) -> set[str]:
    return {name for name in all_imports(module) if name.endswith(".figures") or ".figures." in name}


def test_a_figure_module_never_imports_another_lessons_figure_module():
    """Each lesson's charts live in its own figures.py; what they share lives in `inference.lessons.style`."""
    figure_modules = sorted(LESSONS.glob("*/figures.py"))
    assert len(figure_modules) >= 8
    for path in figure_modules:
        own = f"inference.lessons.{path.parent.name}"
        foreign = {name for name in figure_imports(f"{own}.figures") if not name.startswith(own)}
        assert not foreign, f"{path} imports {sorted(foreign)}"
