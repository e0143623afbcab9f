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
