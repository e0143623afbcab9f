"""Keys for a page that steps a run, so a presenter's clicker drives it: → and PageDown press Step, ← and PageUp
Back, P Play (or Stop while it plays); never while the focus is in a widget that uses those keys itself. A "Skip to
Step" link is the first Tab stop. (`st.button(shortcut=...)` takes one key per button; a clicker needs two.) One
script, run once per browser tab by `st.html`, clicks the page's own buttons by their widget keys: the same rerun."""

from __future__ import annotations

import json

import streamlit as st


def hint(back: bool = True, play: bool = True, step_label: str = "Step") -> str:
    """The keys line, naming only the buttons the page has."""
    keys = [f"→ or PageDown: {step_label}"] + ["← or PageUp: Back"] * back + ["P: Play / Stop"] * play
    return f"Keys: {' · '.join(keys)} (not while typing or on a slider)"


# Roles whose widgets use arrow keys or letters themselves: a key pressed there belongs to them.
OWN_KEY_ROLES = ("textbox", "searchbox", "slider", "spinbutton", "combobox", "listbox", "option", "radiogroup", "radio",
                 "tablist", "tab", "menu", "menuitem", "grid", "gridcell", "tree")  # fmt: skip

# Once per browser tab: the pages' bindings (each acted on only while its buttons are there), one listener, the link.
SCRIPT = """
(() => {
  const lab = (window.__labKeys = window.__labKeys || { bindings: {} });
  const binding = __BINDING__;
  if (binding) lab.bindings[binding.step] = binding;
  const OWN = new Set(__ROLES__);
  const button = (key) => {
    if (!key) return null;
    const b = document.querySelector('.st-key-' + CSS.escape(key) + ' button');
    return b && !b.disabled ? b : null;
  };
  const current = () => Object.values(lab.bindings).find((b) => button(b.step) || button(b.play));
  const owned = (el) => {
    for (let e = el; e && e.nodeType === 1; e = e.parentElement) {
      // a checkbox or toggle (presenter mode's, just switched on) uses no arrow or letter key
      if (e.tagName === 'INPUT' && e.type === 'checkbox') return false;
      if (e.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(e.tagName)) return true;
      if (OWN.has(e.getAttribute('role'))) return true;
    }
    return false;
  };
  // The skip link's rule: shown (and a Tab stop) only on a page whose Step button is there.
  const style = document.getElementById('lab-keys-style') || document.head.appendChild(document.createElement('style'));
  style.id = 'lab-keys-style';
  const shown = Object.values(lab.bindings).map((b) => `body:has(.st-key-${CSS.escape(b.step)} button) #lab-skip-step`);
  style.textContent = `#lab-skip-step { display: none; position: absolute; left: 0.5rem; top: 0.5rem; z-index: 1000100;
      padding: 0.5rem 0.9rem; background: #fff; color: #1f3f7a; border: 2px solid #1f3f7a; border-radius: 0.4rem;
      font: 600 1rem sans-serif; text-decoration: underline; transform: translateY(-200%); }
    #lab-skip-step:focus { transform: none; outline: 3px solid #e69f00; }
    ${shown.join(',\\n')} { display: block; }`;
  if (lab.installed) return;
  lab.installed = true;
  const skip = document.createElement('a');
  skip.id = 'lab-skip-step';
  skip.href = '#';
  skip.textContent = 'Skip to Step (the keys are under it)';
  skip.addEventListener('click', (ev) => {
    ev.preventDefault();
    const b = current();
    const target = b && (button(b.step) || button(b.play));
    if (target) target.focus();
  });
  document.body.prepend(skip);
  // Streamlit's sidebar page list is a UL of DIVs (axe: "list", "listitem"; docs/ACCESSIBILITY.md): fixed by roles.
  const fixNav = () => document.querySelectorAll('[data-testid="stSidebarNavItems"]:not([role])').forEach((ul) => {
    ul.setAttribute('role', 'none');
    ul.querySelectorAll(':scope > div').forEach((section) => section.setAttribute('role', 'list'));
  });
  fixNav();
  new MutationObserver(fixNav).observe(document.body, { childList: true, subtree: true });
  document.addEventListener('keydown', (ev) => {
    if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing) return;
    if (owned(ev.target) || owned(document.activeElement)) return;
    const b = current();
    if (!b) return;
    let target = null;
    if (ev.key === 'ArrowRight' || ev.key === 'PageDown') target = button(b.step);
    else if (ev.key === 'ArrowLeft' || ev.key === 'PageUp') target = button(b.back);
    else if ((ev.key === 'p' || ev.key === 'P') && !ev.shiftKey) target = button(b.stop) || button(b.play);
    if (!target) return;
    ev.preventDefault();  // a clicker's PageDown steps the run; it does not also scroll the page
    if (ev.repeat) return;  // a key held down is one press: one token
    const box = target.getBoundingClientRect();
    if (b.reveal && !(box.bottom > 0 && window.innerHeight > box.top)) {  // no less-than sign: see st.html
      target.scrollIntoView({ block: 'center' });  // the buttons, the newest token and the chart on one screen
    }
    target.click();
  });
})();
"""


def script(step=None, back=None, play=None, stop=None, reveal: bool = False) -> str:
    """The script for `st.html`, binding the keys to these buttons (widget keys); without `step`, only what every
    page gets (listener, skip link, sidebar roles). `reveal`: a key pressed with the buttons off screen scrolls first."""
    binding = json.dumps({"step": step, "back": back, "play": play, "stop": stop, "reveal": reveal} if step else None)
    return SCRIPT.replace("__BINDING__", binding).replace("__ROLES__", json.dumps(list(OWN_KEY_ROLES)))


def bind(step: str, back=None, play=None, stop=None, step_label: str = "Step", reveal: bool = True) -> None:
    """The keys line and the script: → / PageDown `step`, ← / PageUp `back`, P `stop` while shown, else `play`."""
    st.html(
        f'<p class="keys-hint">{hint(bool(back), bool(play), step_label)}</p>'
        f"<script>{script(step, back, play, stop, reveal)}</script>",
        unsafe_allow_javascript=True,
    )


def install() -> None:
    """For the sidebar of every page: the listener, the skip link and the sidebar list's roles."""
    st.html(f"<script>{script()}</script>", unsafe_allow_javascript=True)
