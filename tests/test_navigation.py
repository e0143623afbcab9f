"""Navigation: app.py's `st.navigation` alone decides which page a URL opens, and every page
file is listed there under a URL path equal to its file name."""

import ast

import pytest

from tests.conftest import APP_FILE, PROJECT_ROOT, page_title, run_app

pytestmark = pytest.mark.page

PAGE_FILES = sorted(p for p in (PROJECT_ROOT / "app_pages").glob("*.py") if p.stem != "common")


def navigation_pages() -> list[dict]:
    """Every `st.Page(...)` call in app.py, as its keyword arguments and file."""
    pages = []
    for node in ast.walk(ast.parse((PROJECT_ROOT / "app.py").read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Page":
            keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
            pages.append({"file": ast.literal_eval(node.args[0]), **keywords})
    return pages


def test_there_is_no_pages_folder_so_streamlit_never_runs_its_automatic_multipage_mode():
    """A `pages/` folder next to app.py would make Streamlit run page files without app.py."""
    assert not (PROJECT_ROOT / "pages").exists()
    assert PAGE_FILES, "app_pages/ holds the pages"


def test_every_page_file_is_in_the_navigation_once_under_its_file_name():
    """A page file named kv-cache.py is served at /kv-cache (Generate, the default, also at /)."""
    pages = navigation_pages()
    files = [p["file"] for p in pages]
    assert sorted(files) == sorted(f"app_pages/{p.name}" for p in PAGE_FILES)
    for page in pages:
        stem = page["file"].removeprefix("app_pages/").removesuffix(".py")
        assert page.get("url_path", stem) == stem, page
    assert [p["file"] for p in pages if p.get("default")] == ["app_pages/generate.py"]


def test_the_root_url_opens_generate():
    at = run_app()
    assert at.title[0].value == page_title(PROJECT_ROOT / "app_pages" / "generate.py")


@pytest.mark.parametrize("page_file", PAGE_FILES, ids=lambda p: "/" + p.stem)
def test_a_direct_visit_to_a_url_path_opens_that_page(page_file):
    """The first run of a session asks for the page by URL path, with no earlier run: AppTest
    sends the hash of the file's name, which st.navigation gives the page whose url_path is
    that name (the browser tests open the same paths from the address bar)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP_FILE, default_timeout=300)
    at.switch_page(f"app_pages/{page_file.name}").run()
    assert not at.exception
    assert at.title[0].value == page_title(page_file)


def test_a_visit_to_another_page_keeps_every_setting_of_the_page_left():
    """Streamlit drops a widget's value when a run does not draw it, so without persist_state="session" coming back
    to Generate found an empty prompt and Max new tokens at its minimum, 1 (seen in CI: five Steps drew no token)."""
    at = run_app()
    at.text_area(key="gen_prompt").input("The dragon").run()
    at.number_input(key="gen_max_new").set_value(7).run()
    at.slider(key="gen_temperature").set_value(1.3).run()
    at.switch_page("app_pages/sampling.py").run()
    assert not at.exception
    at.switch_page("app_pages/generate.py").run()
    assert not at.exception
    assert at.text_area(key="gen_prompt").value == "The dragon"
    assert at.number_input(key="gen_max_new").value == 7
    assert at.slider(key="gen_temperature").value == pytest.approx(1.3)


def test_every_keyed_input_widget_keeps_its_value_across_pages():
    """The rule behind the test above, for every page: each input widget with a key says persist_state="session"."""
    import ast

    widgets = {"slider", "select_slider", "number_input", "text_area", "text_input", "selectbox", "radio", "checkbox"}
    widgets |= {"toggle", "segmented_control", "pills", "multiselect"}
    missing = []
    for path in sorted((PROJECT_ROOT / "app_pages").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in widgets:
                keywords = {k.arg: k.value for k in node.keywords}
                persist = keywords.get("persist_state")
                if "key" in keywords and not (isinstance(persist, ast.Constant) and persist.value == "session"):
                    missing.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {node.func.attr}")
    assert not missing, missing
