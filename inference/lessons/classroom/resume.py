"""Failover: the teacher's app host dies mid-class, and the teacher's browser takes the class up on another host.

The teacher's run (`TeacherRun`: a `Trace` on the model, its settings, the open guessing round) lives in one app
process. Every publish also stores a checkpoint (`run_checkpoint`) beside the published state, never sent to
followers: the prompt's token ids and, for every step, the token drawn with its seed and settings, plus the open
round. Another host rebuilds the run from it by replaying the steps on its own copy of the model (the same model, settings and
seeds draw the same tokens; a token that differs stops the replay with a sentence rather than changing the text).

Who may take the class up: the browser that started it. Behind nginx every browser carries a random sticky cookie
(`BROWSER_COOKIE`, set by deploy/nginx.conf, HttpOnly: page scripts cannot read it); the class stores its
SHA-256 as a second teacher credential, so the reconnected browser, and no student, drives the class again.
Students' guesses and membership never lived in the dead process: they are in the store, and stay counted.
"""

from __future__ import annotations

from inference.core.run import new_trace
from inference.lessons.classroom.run_checkpoint import settings_from
from inference.lessons.classroom.store import ClassError, ClassStore
from inference.lessons.classroom.teacher import TeacherRun

BROWSER_COOKIE = "inference_lab"  # deploy/nginx.conf: `map $cookie_inference_lab ...`


def take_up(store: ClassStore, teacher_key: str | None, model, tokenizer, model_name: str):
    """The `TeacherRun` of the class this browser key started, rebuilt on `model`; None if it started none."""
    found = store.taught_by(teacher_key) if teacher_key else None
    if found is None or found[1] is None:
        return None
    code, saved = found
    if saved["model"] != model_name:
        raise ClassError(
            f"This browser teaches class {code} on {saved['model']}: pick {saved['model']} in the sidebar to "
            "take the class up again."
        )
    trace = new_trace(model, tokenizer, saved["prompt_ids"], saved["max_new_tokens"])
    for index, (token_id, seed, settings) in enumerate(saved["steps"]):
        record = trace.step(settings_from(settings), seed=seed)
        if record is None or record.token_id != token_id:
            raise ClassError(
                f"Class {code} cannot be taken up on this server: its model drew another token at step {index + 1} "
                "from the same seed. Start a new class."
            )
    trace.seed = saved["seed"]
    run = TeacherRun(
        store,
        code,
        teacher_key,
        trace,
        saved["model"],
        settings_from(saved["settings"]),
        run_id=saved["run_id"],
        guess_step=saved["guess_step"],
        guessed_choices=saved["guessed_choices"],
        last_reveal=saved["last_reveal"],
    )
    run.published_version = store.info(code).version
    return run
