"""Streamlit glue shared by the pages (no page here), one module per job:

- `models`: the model and engine caches (shared by every session, never mutated) and the session keys
  that say which model a visitor asked for;
- `sidebar`: the sidebar every page draws (model picker, engine picker, presenter toggle) and
  `current_model()`, which draws it and returns the visitor's model;
- `layout`: presenter mode and the column helpers that follow it;
- `captions`: the one vocabulary for how a number was obtained, and the step summary line;
- `escaping`: token text made safe for HTML;
- `url_state`: settings read from a shared link once per session;
- `slots`: the server's model slots and each visitor's run lock, and a serving engine's failure as a sentence;
- `shared_results`: measurements kept for every visitor, and the button that makes them;
- `stepper`: the Step / Play / Back / Reset row of a page that steps a run, with Stop;
- `sampler_controls`: the table of sampling knobs (range, URL parameter, default, help) and their widgets.
"""
