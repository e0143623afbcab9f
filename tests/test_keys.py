"""The keys script (app_pages/shared/keys.py) as text: what st.html is given."""

import json
import re
import shutil
import subprocess

import pytest

from app_pages.shared.keys import OWN_KEY_ROLES, script

pytestmark = pytest.mark.unit


def test_the_script_has_no_markup_that_the_html_sanitizer_would_parse():
    """A '<' in the script (even in a comment: '<ul>') stopped st.html from running it at all in Streamlit 1.67."""
    assert "<" not in script("gen_step", "gen_back", "gen_play", "gen_stop")
    assert "<" not in script()


def test_the_binding_names_the_pages_widget_keys_and_the_roles_that_keep_their_keys():
    text = script("gen_step", back=None, play="gen_play", stop="gen_stop")
    binding = json.loads(re.search(r"const binding = (\{.*?\});", text).group(1))
    assert binding == {"step": "gen_step", "back": None, "play": "gen_play", "stop": "gen_stop", "reveal": False}
    assert json.loads(re.search(r"const binding = (\{.*?\});", script("s", reveal=True)).group(1))["reveal"] is True
    assert "const binding = null;" in script()  # every page's part alone binds no button
    assert {"slider", "textbox", "combobox"} <= set(OWN_KEY_ROLES)
    assert all(f'"{role}"' in text for role in OWN_KEY_ROLES)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed: the syntax check needs it")
def test_the_script_is_valid_javascript(tmp_path):
    for name, text in (("bound.js", script("a_step", "a_back", "a_play", "a_stop")), ("bare.js", script())):
        path = tmp_path / name
        path.write_text(text)
        subprocess.run(["node", "--check", str(path)], check=True, capture_output=True)


def test_the_keys_line_names_only_the_buttons_the_page_has():
    from app_pages.shared.keys import hint

    assert "Back" not in hint(back=False) and "Play" in hint(back=False)
    assert "Play" not in hint(play=False) and "PageUp" in hint(play=False)
    assert hint(play=False, step_label="Draw and reveal").startswith("Keys: → or PageDown: Draw and reveal")
