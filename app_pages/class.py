"""Class mode: the teacher's run on every student's screen; the class guesses, then sees the draw."""

import streamlit as st

from app_pages.shared import keys, layout
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.escaping import escape
from app_pages.shared.models import limits
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import engine_errors, generation_slot
from inference.core.prompting import opening_prompt, prepare_prompt
from inference.core.tokens import html_token_text, markdown_token_text
from inference.lessons.classroom import session
from inference.lessons.classroom.figures import choices_chart, reveal_chart
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassError, ClassStore, normalise_code
from inference.lessons.classroom.teacher import BROWSER_COOKIE, TeacherRun
from inference.sampling.pipeline import SamplingSettings

TEACHER_KEY = "class_teacher"  # the TeacherRun: the secret lives here, in the teacher's session only
MEMBER_KEY = "class_member"  # {code: member id} for a student
POLL_SECONDS = 1.0


@st.cache_resource(show_spinner=False)
def class_store(path: str, idle_minutes: int, max_members: int) -> ClassStore:
    return ClassStore(path, idle_seconds=idle_minutes * 60, max_members=max_members)  # a file, or a postgresql:// URL


@st.cache_resource(max_entries=64, show_spinner=False)
def charts(code: str, version: int, presenter: bool, _state: dict) -> tuple:
    """The two charts of one published state, built once for every follower (building a Plotly figure costs
    ~100x reading the class): (code, version) names the state, which a publish never changes afterwards.
    The figures are shared between sessions: never modified after this."""
    choices = choices_chart(_state["choices"], presenter) if _state["choices"] else None
    revealed = reveal_chart(_state["reveal"], presenter) if _state["reveal"] else None
    return choices, revealed


def store() -> ClassStore:
    lim = limits()
    return class_store(lim.class_db, lim.class_idle_minutes, lim.max_class_size)


def text_line(state: dict) -> str:
    """The run so far as HTML: the prompt grey, the generated tokens dark, every label escaped."""
    prompt = "".join(html_token_text(t) for t in state["prompt"])
    written = "".join(html_token_text(t) for t in state["generated"])
    return (
        f'<div class="class-text" style="font-size:1.25rem;line-height:1.7"><span style="color:#666">{prompt}</span>'
        f"<b>{written}</b>▍</div>"
    )


def settings_line(state: dict) -> str:
    s = state["settings"]
    return (
        f"{escape(state['model'])} · step {state['step'] + 1} · temperature {s['temperature']:g} · "
        f"top-p {s['top_p']:g} · seed {state['seed']}"
    )


def show_reveal(rv: dict, figure) -> None:
    st.success(markdown_token_text(session.reveal_sentence(rv)))
    chart(figure, width="stretch", key="class_reveal")
    caption(
        "exact",
        "The model's probabilities are computed exactly by the teacher's run after the settings; the class's "
        "bars count the answers given (each student's last answer for this step, counted, not attributed).",
    )


# -- the teacher -----------------------------------------------------------------------------------
def teacher_view(run: TeacherRun, loaded) -> None:
    base = (st.context.url or "").split("?")[0] or "http://<this server>/class"
    link = f"{base}?class={run.code}"
    st.markdown(f"### Class code: `{run.code}`")
    st.markdown(f"Project this link: `{escape(link)}`")
    c1, c2 = st.columns(2)  # two sliders a row: their labels stay whole at 800 px and in presenter mode
    temperature = c1.slider(
        "Temperature", 0.0, 2.0, run.settings.temperature, 0.05, key="class_t", persist_state="session"
    )
    top_p = c2.slider("Top-p", 0.01, 1.0, run.settings.top_p, 0.01, key="class_p", persist_state="session")
    st.markdown(f"Seed **{run.trace.seed}** · step **{run.trace.next_index + 1}**")
    run.change_settings(SamplingSettings(temperature=temperature, top_p=top_p))

    # Two a row in presenter mode (projector-sized labels), five otherwise; each button fills its cell.
    b = st.columns(2) + st.columns(2) + st.columns(2)[:1] if layout.presenter() else st.columns(5)
    actions = {
        "open": b[0].button(
            "Open guessing",
            disabled=run.guess_step is not None or run.trace.finished,
            key="class_open",
            width="stretch",
        ),
        "step": b[1].button(
            session.STEP_BUTTON, type="primary", disabled=run.trace.finished, key="class_step", width="stretch"
        ),
        "again": b[2].button("Another seed", disabled=not run.trace.records, key="class_again", width="stretch"),
        "back": b[3].button("Back", disabled=not run.trace.records, key="class_back", width="stretch"),
    }
    keys.bind(
        "class_step", back="class_back", step_label=session.STEP_BUTTON
    )  # a clicker: PageDown draws and reveals, PageUp goes back
    act = {"open": run.open_guessing, "step": run.step, "again": run.same_step_another_seed, "back": run.back}
    for name, clicked in actions.items():
        if clicked:
            acted = False
            with generation_slot(), engine_errors():
                act[name]()
                acted = True
            if acted:  # the buttons above were drawn before the action: redraw them (Back was still greyed out)
                st.rerun()
    if b[4].button("End class", key="class_end", width="stretch"):
        store().end(run.code, run.secret)
        del st.session_state[TEACHER_KEY]
        st.rerun()
    answers_counter(run)
    info = store().info(run.code)
    state = info.state
    choices_fig, reveal_fig = charts(info.code, info.version, layout.presenter(), state)
    st.markdown(text_line(state), unsafe_allow_html=True)
    if state["reveal"]:
        show_reveal(state["reveal"], reveal_fig)
    if state["guess_open"]:  # the teacher's screen is projected: the candidates wait for the reveal
        st.info(f"The model's candidates are hidden while guessing is open: **{session.STEP_BUTTON}** shows them.")
    elif choices_fig is not None:
        chart(choices_fig, width="stretch", key="class_choices")
        caption(*session.choices_caption(state.get("distribution"), teacher=True))


@st.fragment(run_every=POLL_SECONDS)
def answers_counter(run: TeacherRun) -> None:
    try:
        info = store().info(run.code)
    except ClassError as err:
        st.error(str(err))
        return
    if run.guess_step:
        st.info(f"Guessing is open: {run.answers_so_far()} of {info.members} students have answered.")
    else:
        st.caption(f"{info.members} student{'' if info.members == 1 else 's'} joined.")


def start_class(loaded) -> None:
    st.markdown("#### Teach: start a class")
    opening = opening_prompt("class", loaded.info.name).text
    prompt = st.text_input("Prompt", opening, key="class_prompt", persist_state="session")
    names_on = st.checkbox("Show students' names with their answers", key="class_names_on", persist_state="session")
    if st.button("Start a class", type="primary", key="class_start"):
        lim = limits()
        prepared = prepare_prompt(loaded.tokenizer, prompt, False, loaded.info.context, lim, 60)
        if not prepared.ids:
            st.error("Type a prompt first: the model needs at least one token to continue.")
            return
        code, secret = store().create(names_on=names_on, teacher_key=browser_key())
        with generation_slot(), engine_errors():
            st.session_state[TEACHER_KEY] = TeacherRun.start(
                store(), code, secret, loaded.model, loaded.tokenizer, prepared.ids, prepared.max_new_tokens,
                SamplingSettings(temperature=1.0), seed=0, model_name=loaded.info.name,
            )  # fmt: skip
        st.rerun()


def browser_key() -> str | None:
    key = st.context.cookies.get(BROWSER_COOKIE)  # behind deploy/nginx.conf; None without nginx
    return key if isinstance(key, str) and key else None


def taken_up(loaded) -> TeacherRun | None:
    """The teacher's app host died: this browser (its sticky cookie) takes its class up on this host."""
    key = browser_key()
    if not key or store().taught_by(key) is None:
        return None
    with generation_slot(), engine_errors():
        run = TeacherRun.take_up(store(), key, loaded.model, loaded.tokenizer, loaded.info.name)
        if run is not None:
            st.session_state[TEACHER_KEY] = run
    return st.session_state.get(TEACHER_KEY)


# -- a student --------------------------------------------------------------------------------------
def member_of(code: str, info) -> str | None:
    members = st.session_state.setdefault(MEMBER_KEY, {})
    if code not in members and not info.names_on:
        members[code] = store().join(code)
    if code not in members:
        name = st.text_input(
            "Your name (the teacher shows names with answers)", max_chars=40, key="class_name", persist_state="session"
        )
        if st.button("Join", key="class_join") and name.strip():
            members[code] = store().join(code, name.strip())
            st.rerun()
    return members.get(code)


@st.fragment(run_every=POLL_SECONDS)
def follow(code: str) -> None:
    """A student's screen: one SQLite read a second; the charts follow the teacher's last publish."""
    try:
        info = store().info(code)
        member = member_of(code, info)
    except ClassError as err:
        st.error(str(err))
        return
    state = info.state
    if member is None or state is None:
        st.info("Waiting for the teacher…")
        return
    choices_fig, reveal_fig = charts(info.code, info.version, layout.presenter(), state)
    st.caption(settings_line(state))
    st.markdown(text_line(state), unsafe_allow_html=True)
    if state["guess_open"] and info.guess_step:
        guess_form(code, member, info.guess_step, state)
    elif state["reveal"]:
        show_reveal(state["reveal"], reveal_fig)
    if not state["guess_open"] and choices_fig is not None:
        chart(choices_fig, width="stretch", key="follow_choices")
        caption(*session.choices_caption(state.get("distribution"), teacher=False))
    if st.button("Fork: continue this text in my own Generate run", key="class_fork"):
        fork_into_generate(state)


def guess_form(code: str, member: str, step: str, state: dict) -> None:
    labels = {o["id"]: o["label"] for o in state["options"]} | {SOMETHING_ELSE: "something else"}
    with st.form(f"guess_{step}"):
        st.markdown("**What will the model write next?**")
        pick = st.radio(
            "Your guess",
            list(labels),
            format_func=lambda i: labels[i],
            horizontal=True,
            key="class_guess",
            persist_state="session",
        )
        stated = st.slider(
            "How likely do you think it is? (optional)",
            0,
            100,
            0,
            5,
            format="%d%%",
            key="class_stated",
            persist_state="session",
        )
        if st.form_submit_button("Send my guess"):
            try:
                store().answer(code, member, step, pick, stated / 100 if stated else None)
                st.session_state[f"answered_{step}"] = labels[pick]
            except ClassError as err:
                st.error(str(err))
    if f"answered_{step}" in st.session_state:
        st.caption(f"Your guess is in: {markdown_token_text(st.session_state[f'answered_{step}'])}. You can change it.")


def fork_into_generate(state: dict) -> None:
    """The teacher's text so far becomes the prompt of this student's own Generate run (tokenized again), with
    the teacher's settings and seed; the student changes what they like there."""
    s = state["settings"]
    st.session_state.update(
        gen_prompt=state["text"],
        gen_chat=False,  # the teacher's run read the plain text (no chat template): the student continues the same
        gen_temperature=float(s["temperature"]),
        gen_top_p=float(s["top_p"]),
        gen_seed=int(state["seed"]),
        gen_url_read=True,
    )
    st.switch_page("app_pages/generate.py")


# -- page ---------------------------------------------------------------------------------------------
loaded = current_model(remote_ok=True)
st.title("🧑‍🏫 Class mode")
st.markdown(session.INTRO)
code = normalise_code(st.query_params.get("class", ""))
teacher = st.session_state.get(TEACHER_KEY)
if teacher is None and not code:
    try:
        teacher = taken_up(loaded)
    except ClassError as err:
        st.error(str(err))
if teacher is not None:
    try:
        teacher_view(teacher, loaded)
    except ClassError as err:
        st.error(str(err))
        st.session_state.pop(TEACHER_KEY, None)
elif code:
    follow(code)
else:
    left, right = st.columns(2)
    with left:
        start_class(loaded)
    with right:
        st.markdown("#### Learn: join a class")
        typed = st.text_input("Class code", max_chars=12, key="class_code_typed", persist_state="session")
        if st.button("Join the class", key="class_join_code") and typed.strip():
            st.query_params["class"] = normalise_code(typed)
            st.rerun()
