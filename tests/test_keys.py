"""The keys script (app_pages/shared/keys.py) as text: what st.html is given."""

import json
import re
import shutil
import subprocess

import pytest

from app_pages.shared.keys import hint, script

pytestmark = pytest.mark.unit


def binding(text: str):
    return json.loads(re.search(r"const binding = (\{.*?\}|null);", text).group(1))


def test_the_script_binds_the_pages_buttons_and_has_no_markup_the_html_sanitizer_would_parse():
    """A '<' in the script (even in a comment) stopped st.html from running it at all in Streamlit 1.67."""
    bound = script("gen_step", back=None, play="gen_play", stop="gen_stop")
    assert binding(bound) == {"step": "gen_step", "back": None, "play": "gen_play", "stop": "gen_stop", "reveal": False}
    assert binding(script("s", reveal=True))["reveal"] is True and binding(script()) is None
    assert "<" not in bound and "<" not in script()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the syntax check needs it")
def test_the_script_is_valid_javascript(tmp_path):
    for name, text in (("bound.js", script("a_step", "a_back", "a_play", "a_stop")), ("bare.js", script())):
        (tmp_path / name).write_text(text)
        subprocess.run(["node", "--check", str(tmp_path / name)], check=True, capture_output=True)


def test_the_keys_line_names_only_the_buttons_the_page_has():
    assert "Back" not in hint(back=False) and "Play" in hint(back=False)
    assert "Play" not in hint(play=False) and "PageUp" in hint(play=False)
    assert hint(play=False, step_label="Draw and reveal").startswith("Keys: → or PageDown: Draw and reveal")
