"""Generate: the model writes one token at a time, and every choice is shown."""

import pyarrow as pa
import streamlit as st

from app_pages.shared import generate_controls, layout, models
from app_pages.shared import sampler_controls as controls
from app_pages.shared.captions import caption, summary_line
from app_pages.shared.charts import chart
from app_pages.shared.reconnect import reconnect_guard
from app_pages.shared.session_memo import kept_per_record, kept_until_changed
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import engine_errors, generation_slot, session_lock
from app_pages.shared.stepper import Stepper
from inference.core.prompting import GENERATE_SAMPLING, opening_prompt, prepare_prompt
from inference.core.remote import distribution_note, is_remote, step_timing_note
from inference.core.run import SEED_MAX, new_trace, record_row
from inference.lessons.generate.current_step import current_step_view
from inference.lessons.generate.figures import (
    cumulative_curve,
    next_token_bars,
    prompt_chips,
    record_chip,
    step_table_row,
    token_html,
)
from inference.lessons.generate.links import replay, schedule_param
from inference.lessons.generate.text import TEXT, knobs_now

# URL parameter -> (widget key, type): a shared link reopens the same prompt, settings and seed.
URL_PARAMS = {
    "prompt": ("gen_prompt", str),
    **controls.url_params("gen", controls.CLASSIC),
    "seed": ("gen_seed", int),
    "max": ("gen_max_new", int),
    "sched": ("gen_sched", str),  # steps drawn with other settings or seeds than the sliders' (lessons/generate/links)
}
TOKENS_SHOWN = 20  # bars of the next-token chart, until its slider moves
DEFAULTS = {"gen_seed": 0, "gen_max_new": 60, "gen_sched": ""}  # the prompt: the model's opening prompt
SAMPLING_DEFAULTS = GENERATE_SAMPLING  # typical chat settings, picked with the opening question (prompting.py)
RANGES = {**controls.ranges("gen", controls.CLASSIC), "gen_seed": (0, SEED_MAX)}

stepper = Stepper("gen", "gen_trace", steps_done=lambda trace: len(trace.records), with_back=True)
limits = models.limits()
RANGES["gen_max_new"] = (1, limits.max_new_tokens)
loaded = current_model(remote_ok=True)
remote = is_remote(loaded)
model, tokenizer = loaded.model, loaded.tokenizer
opening = opening_prompt("generate", loaded.info.name)
DEFAULTS["gen_prompt"] = opening.text
st.session_state.setdefault("gen_chat", opening.chat)  # a chat model opens in its template; the visitor's value wins

controls.set_defaults("gen", SAMPLING_DEFAULTS, knobs=controls.CLASSIC)
url_problems = stepper.read_url(URL_PARAMS, DEFAULTS, RANGES)
st.title("✍️ Generate, one token at a time")
st.markdown(TEXT["intro"])
for problem in url_problems:
    st.warning(problem)

controls.set_defaults("gen", knobs=controls.MORE)
if not st.session_state.get("gen_more_url_read"):  # the newer samplers and the order from a shared link
    st.session_state["gen_more_url_read"] = True
    for problem in controls.read_url("gen", "", st.query_params, knobs=controls.MORE):
        st.warning(problem)


chat, settings_line = generate_controls.draw(loaded.info.has_chat_template, limits.max_new_tokens)
settings = controls.settings_from_state("gen")
seed = int(st.session_state.gen_seed)
if settings_line is not None:
    parts = " · ".join((["in the chat template"] if chat else []) + knobs_now(settings))
    settings_line.caption(TEXT["now"].format(parts=parts, seed=seed, max_new=int(st.session_state.gen_max_new)))

prepared = prepare_prompt(
    tokenizer, st.session_state.gen_prompt, chat, loaded.info.context, limits, int(st.session_state.gen_max_new)
)
for note in prepared.notes:
    st.info(note)
run_key = (loaded.info.name, tuple(prepared.ids), int(st.session_state.gen_max_new))


def start_new_trace():
    return new_trace(
        model, tokenizer, prepared.ids, min(int(st.session_state.gen_max_new), prepared.max_new_tokens), seed
    )


def table_of(trace) -> pa.Table:
    """The step table, each row made once and kept; Arrow, which Streamlit sends as it is (a DataFrame cost 9x)."""
    with session_lock():  # another run of this session may be stepping the same trace
        return pa.Table.from_pylist(kept_per_record("gen_table_rows", trace, lambda r: step_table_row(record_row(r))))


def csv_of(trace) -> bytes:
    with session_lock():
        return trace.to_frame().to_csv(index=False).encode()


def chips_of(trace) -> tuple[str, list[str]]:
    """The prompt's chips and one chip per record, each made once and kept: a Step makes one chip."""
    prompt = kept_until_changed(
        "gen_prompt_chips",
        (loaded.info.name, tuple(trace.prompt_ids)),
        lambda: prompt_chips(tokenizer, trace.prompt_ids),
    )
    return prompt, kept_per_record("gen_chips", trace, lambda r: record_chip(tokenizer, r))


def show_text(trace, text_box) -> None:
    if trace is not None:
        with session_lock():  # another run of this session may be stepping the same trace
            prompt, chips = chips_of(trace)
            lead = f"{len(trace.prompt_ids)} prompt tokens · {len(trace.records)} generated"
            status = stepper.status_text(trace, lead, TEXT["next"].format(step=trace.next_index))
            html = token_html(tokenizer, trace.prompt_ids, trace.records, chips=chips, prompt=prompt, status=status)
        text_box.markdown(html, unsafe_allow_html=True)


@st.fragment
def run_section() -> None:
    """The buttons, the run and everything drawn from it: a fragment, so a Step reruns only this (its server CPU is
    `page_step_server_cpu_ms` in `python -m inference.bench --pages`). The text, then the buttons, then the chart:
    Step, the newest token and the chart on one screen."""
    text_box = st.empty()
    stepper.buttons()
    if prepared.error:
        st.warning(prepared.error)  # keep showing the last run below; nothing is lost
    trace = stepper.current_run(run_key, start_new_trace, can_start=not prepared.error)
    if trace is not None and not prepared.error:

        def replay_link(steps: int) -> None:  # a shared link's steps, each with the settings and seed it was drawn with
            if problem := replay(trace, st.session_state.get("gen_sched", ""), steps, settings, seed):
                st.warning(problem)

        stepper.advance(trace, lambda: trace.step(settings, seed), replay=replay_link)

    if trace is not None and not prepared.error:
        stepper.play_if_clicked(trace, lambda: trace.step(settings, seed), lambda: show_text(trace, text_box))
    show_text(trace, text_box)

    stepper.mirror_url(
        trace,
        {
            "prompt": st.session_state.gen_prompt[:1000],
            **{knob.param: f"{getattr(settings, knob.field):g}" for knob in controls.CLASSIC},
            "seed": str(seed),
            "max": str(int(st.session_state.gen_max_new)),
        },
        extra=controls.url_values("gen", "", settings, knobs=controls.MORE)
        | ({"sched": sched} if trace is not None and (sched := schedule_param(trace.records, settings, seed)) else {}),
    )

    if trace is not None:
        logits = None
        if not trace.finished:
            with generation_slot(), engine_errors():
                logits = trace.peek()
        if logits is None and not trace.records:
            return  # a serving engine failed before the first step: its message is above
        with session_lock():  # the view reads the trace: never while another run of this session steps it
            view, heading, changed_note = current_step_view(trace, logits, settings)
        st.markdown(f"### {heading}\n\n{summary_line(view)}")  # one element: the heading and the step's numbers
        if changed_note:
            st.caption(changed_note)
        top_n = int(st.session_state.get("gen_top_n", TOKENS_SHOWN))  # its slider sits under the charts
        table = view.columns(tokenizer, top_n=top_n)
        exact, engine_note, server_step = True, "", None  # an engine's top N makes both charts measured, not exact
        if remote:
            server_step = trace.pending_server_step() if logits is not None else trace.records[-1].server_step
            note_kind, engine_note = distribution_note(loaded.model, server_step)
            exact = note_kind == "exact"
        chart_left, chart_right = layout.side_by_side(2)
        with chart_left:
            chart(next_token_bars(table, layout.presenter()), width="stretch", key="gen_bars")
            caption("exact" if exact else "measured", TEXT["bars_remote" if remote else "bars"])
            if remote:
                caption("exact" if exact else "measured", engine_note)
                if timing := step_timing_note(server_step):
                    caption("measured", timing)
        with chart_right:
            chart(
                cumulative_curve(view, tokenizer, view.settings.top_p, layout.presenter()),
                width="stretch",
                key="gen_cumulative",
            )
            caption("exact" if exact else "measured", TEXT["cumulative"])
        st.slider("Tokens shown", 10, 50, TOKENS_SHOWN, step=5, key="gen_top_n", persist_state="session")

        if trace.records:
            fork = st.expander(  # its widgets run only while it is open (a Step need not redraw them)
                "Fork: go back to an earlier step and continue with other settings",
                key="gen_fork_open",
                on_change="rerun",
            )
            if fork.open:
                with fork:
                    f1, f2 = st.columns([3, 1])
                    fork_at = f1.number_input(
                        "Fork at step",
                        min_value=0,
                        max_value=len(trace.records) - 1,
                        value=max(0, len(trace.records) - 1),
                        step=1,
                        key="gen_fork_step",
                        persist_state="session",
                    )
                    if f2.button("Fork here", key="gen_fork"):
                        with generation_slot():
                            trace.rewind(int(fork_at))
                        st.rerun()
                    st.caption(TEXT["fork"])

            every = st.expander(  # closed, a Step sends one line here, not the table, its CSV button and caption
                "Every step: a table of all the steps so far, with a CSV download",  # fixed: the label is its id
                key="gen_steps_open",
                on_change="rerun",
            )
            if every.open:
                with every:
                    st.dataframe(table_of(trace), hide_index=True, width="stretch", key="gen_table")
                    st.download_button(  # the CSV is made when it is downloaded, not on every rerun
                        "Download CSV",
                        lambda: csv_of(trace),
                        "inference_lab_steps.csv",
                        "text/csv",
                        key="gen_csv",
                    )
                    caption("measured", TEXT["table_remote" if remote else "table_local"])


reconnect_guard()  # before the fragment: a reconnect must rerun the page even if the run section fails
run_section()
