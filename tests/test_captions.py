"""One label vocabulary: every caption on every page is Measured, Computed exactly, Simulated, Published or
Illustrative."""

import ast
from pathlib import Path

import pytest

from tests.conftest import PROJECT_ROOT

pytestmark = pytest.mark.unit

FIVE = {"measured", "exact", "simulated", "published", "illustrative"}
PAGES = sorted((PROJECT_ROOT / "app_pages").glob("*.py"))


def caption_kinds(path: Path) -> list[tuple[int, object]]:
    """(line, kind) of every `caption(...)` call (app_pages.shared.captions); kind is None when it is not a literal."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        shared = (
            isinstance(func, ast.Attribute)
            and func.attr == "caption"
            and isinstance(func.value, ast.Name)
            and func.value.id == "common"
        ) or (isinstance(func, ast.Name) and func.id == "caption")
        if not shared:  # st.caption / column.caption are Streamlit's own small text
            continue
        if not node.args:
            found.append((node.lineno, None))
            continue
        first = node.args[0]
        if isinstance(first, ast.Starred):  # (kind, text) made by a function at run time: caption() checks it
            continue
        options = [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]
        for option in options:
            found.append((node.lineno, option.value if isinstance(option, ast.Constant) else None))
    return found


def test_the_common_module_offers_exactly_the_five_kinds():
    """caption() knows the five kinds and nothing else."""
    import importlib

    common = importlib.import_module("app_pages.shared.captions")
    assert set(common.CAPTION_KINDS) == FIVE


def test_every_caption_call_on_every_page_uses_one_of_the_five_kinds():
    """A literal kind from the vocabulary at every call site, so a typo or a sixth kind fails here, not on screen."""
    calls = {path.name: caption_kinds(path) for path in PAGES}
    assert sum(len(found) for found in calls.values()) > 20  # the pages do caption their charts
    wrong = [(page, line, kind) for page, found in calls.items() for line, kind in found if kind not in FIVE]
    assert not wrong, wrong


def test_caption_refuses_a_kind_outside_the_vocabulary():
    """A kind chosen at run time (e.g. a remote engine's note) is checked by caption() itself."""
    import importlib

    import pytest

    common = importlib.import_module("app_pages.shared.captions")
    with pytest.raises(ValueError, match="caption kind must be one of"):
        common.caption("data", "an old tag")
