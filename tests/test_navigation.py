"""Navigation: app.py's `st.navigation` lists every page file under a URL path equal to its file name (each opened
by tests/test_every_page_every_model.py), and a page's settings survive a visit to another page."""

import ast

import pytest

from tests.conftest import PROJECT_ROOT, run_app

pytestmark = pytest.mark.page

PAGE_FILES = sorted((PROJECT_ROOT / "app_pages").glob("*.py"))
WIDGETS = {"slider", "select_slider", "number_input", "text_area", "text_input", "selectbox", "radio", "checkbox",
           "toggle", "segmented_control", "pills", "multiselect"}  # fmt: skip


def test_every_page_file_is_in_the_navigation_once_under_its_file_name():
    """No `pages/` folder (Streamlit would run its files without app.py); /kv-cache serves kv-cache.py."""
    assert not (PROJECT_ROOT / "pages").exists() and PAGE_FILES
    pages = [
        {"file": ast.literal_eval(node.args[0]), **{k.arg: ast.literal_eval(k.value) for k in node.keywords}}
        for node in ast.walk(ast.parse((PROJECT_ROOT / "app.py").read_text()))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page"
    ]
    assert sorted(p["file"] for p in pages) == [f"app_pages/{p.name}" for p in PAGE_FILES]
    for page in pages:
        stem = page["file"].removeprefix("app_pages/").removesuffix(".py")
        assert page.get("url_path", stem) == stem, page
    assert [p["file"] for p in pages if p.get("default")] == ["app_pages/generate.py"]


def test_a_visit_to_another_page_keeps_every_setting_of_the_page_left():
    """Streamlit drops a widget's value when a run does not draw it: without persist_state="session", coming back to
    Generate found an empty prompt and Max new tokens at 1."""
    at = run_app()
    at.text_area(key="gen_prompt").input("The dragon").run()
    at.number_input(key="gen_max_new").set_value(7).run()
    at.switch_page("app_pages/sampling.py").run()
    at.switch_page("app_pages/generate.py").run()
    assert not at.exception
    assert (at.text_area(key="gen_prompt").value, at.number_input(key="gen_max_new").value) == ("The dragon", 7)


def test_every_keyed_input_widget_keeps_its_value_across_pages():
    """The rule behind the test above, for every page: each input widget with a key says persist_state="session"."""
    missing = []
    for path in sorted((PROJECT_ROOT / "app_pages").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WIDGETS:
                keywords = {k.arg: k.value for k in node.keywords}
                persist = keywords.get("persist_state")
                if "key" in keywords and not (isinstance(persist, ast.Constant) and persist.value == "session"):
                    missing.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {node.func.attr}")
    assert not missing, missing
