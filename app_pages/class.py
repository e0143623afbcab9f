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
from inference.lessons.classroom import teacher as lesson
from inference.lessons.classroom.figures import choices_chart, reveal_chart
from inference.lessons.classroom.store import SOMETHING_ELSE, ClassError, ClassStore, normalise_code
from inference.lessons.classroom.teacher import STEP_BUTTON, TeacherRun
from inference.sampling.pipeline import SamplingSettings

TEACHER_KEY = "class_teacher"  # the TeacherRun: the secret lives here, in the teacher's session only
MEMBER_KEY = "class_member"  # {code: member id} for a student
POLL_SECONDS = 1.0


@st.cache_resource(show_spinner=False)
def class_store(path: str, idle_minutes: int, max_members: int) -> ClassStore:
    return ClassStore(path, idle_seconds=idle_minutes * 60, max_members=max_members)  # a file, or a postgresql:// URL


def store() -> ClassStore:
    lim = limits()
    return class_store(lim.class_db, lim.class_idle_minutes, lim.max_class_size)


@st.cache_resource(max_entries=64, show_spinner=False)
def charts(code: str, version: int, presenter: bool, _state: dict) -> tuple:
    """The two charts of one published state, built once for every follower ((code, version) names the state;
    the figures are shared between sessions: never modified)."""
    choices = choices_chart(_state["choices"], presenter) if _state["choices"] else None
    return choices, reveal_chart(_state["reveal"], presenter) if _state["reveal"] else None


def show_state(info, teacher: bool) -> None:
    """The run so far (the prompt grey, the generated tokens dark), the last reveal and the coming step's choices."""
    state = info.state
    choices_fig, reveal_fig = charts(info.code, info.version, layout.presenter(), state)
    prompt, written = ("".join(html_token_text(t) for t in state[part]) for part in ("prompt", "generated"))
    st.markdown(
        f'<div class="class-text" style="font-size:1.25rem;line-height:1.7"><span style="color:#666">{prompt}</span>'
        f"<b>{written}</b>▍</div>",
        unsafe_allow_html=True,
    )
    if state["reveal"]:  # (none while guessing is open)
        st.success(markdown_token_text(lesson.reveal_sentence(state["reveal"])))
        chart(reveal_fig, key="class_reveal")
        caption(
            "exact",
            "The model's probabilities are computed exactly by the teacher's run after the settings; the class's "
            "bars count the answers given (each student's last answer for this step, counted, not attributed).",
        )
        if teacher:  # who picked what (names, when the teacher turned them on) and how sure they said they were
            said = [f"'{r['label']}': {', '.join(r['names'])}" for r in state["reveal"]["rows"] if r["names"]]
            said += [f"'{r['label']}' {r['stated_mean']:.0%} likely on average" for r in state["reveal"]["rows"]
                     if r["stated_mean"] is not None]  # fmt: skip
            if said:
                st.caption(markdown_token_text("The class's answers: " + " · ".join(said)))
    if state["guess_open"]:  # no screen shows the candidates while the class guesses, the projected one included
        if teacher:
            st.info(f"The model's candidates are hidden while guessing is open: **{STEP_BUTTON}** shows them.")
    elif choices_fig is not None:
        chart(choices_fig, key="class_choices")
        caption(*lesson.choices_caption(state.get("distribution"), teacher=teacher))


# -- the teacher ---------------------------------------------------------------------------------------------------
def teacher_view(run: TeacherRun) -> None:
    base = (st.context.url or "").split("?")[0] or "http://<this server>/class"
    st.markdown(f"### Class code: `{run.code}`")
    st.markdown(f"Project this link: `{escape(f'{base}?class={run.code}')}`")
    c1, c2 = st.columns(2)  # two sliders a row: their labels stay whole at 800 px and in presenter mode
    t = c1.slider("Temperature", 0.0, 2.0, run.settings.temperature, 0.05, key="class_t", persist_state="session")
    top_p = c2.slider("Top-p", 0.01, 1.0, run.settings.top_p, 0.01, key="class_p", persist_state="session")
    st.markdown(f"Seed **{run.trace.seed}** · step **{run.trace.next_index + 1}**")
    run.change_settings(SamplingSettings(temperature=t, top_p=top_p))

    # Two a row in presenter mode (projector-sized labels), five otherwise; each button fills its cell.
    cells = st.columns(2) + st.columns(2) + st.columns(2)[:1] if layout.presenter() else st.columns(5)
    done, empty = run.trace.finished, not run.trace.records
    buttons = [
        ("Open guessing", "class_open", run.open_guessing, run.guess_step is not None or done, "secondary"),
        (STEP_BUTTON, "class_step", run.step, done, "primary"),
        ("Another seed", "class_again", run.same_step_another_seed, empty, "secondary"),
        ("Back", "class_back", run.back, empty, "secondary"),
    ]
    for cell, (label, key, action, disabled, kind) in zip(cells, buttons):
        if cell.button(label, key=key, disabled=disabled, type=kind, width="stretch"):
            with generation_slot(), engine_errors():
                action()
                st.rerun()  # the buttons were drawn before the action (Back was still greyed out)
    keys.bind("class_step", back="class_back", step_label=STEP_BUTTON)  # a clicker: PageDown draws, PageUp goes back
    if cells[4].button("End class", key="class_end", width="stretch"):
        store().end(run.code, run.secret)
        del st.session_state[TEACHER_KEY]
        st.rerun()
    answers_counter(run)
    show_state(store().info(run.code), teacher=True)


@st.fragment(run_every=POLL_SECONDS)
def answers_counter(run: TeacherRun) -> None:
    try:
        members = store().info(run.code).members
    except ClassError as err:
        st.error(str(err))
        return
    if run.guess_step:
        st.info(f"Guessing is open: {run.answers_so_far()} of {members} students have answered.")
    else:
        st.caption(f"{members} student{'' if members == 1 else 's'} joined.")


def start_class(loaded) -> None:
    st.markdown("#### Teach: start a class")
    opening = opening_prompt("class", loaded.info.name).text
    prompt = st.text_input("Prompt", opening, key="class_prompt", persist_state="session")
    names_on = st.checkbox("Show students' names with their answers", key="class_names_on", persist_state="session")
    if st.button("Start a class", type="primary", key="class_start"):
        prepared = prepare_prompt(loaded.tokenizer, prompt, False, loaded.info.context, limits(), 60)
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
    key = st.context.cookies.get(lesson.BROWSER_COOKIE)  # behind deploy/nginx.conf; None without nginx
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


# -- a student -----------------------------------------------------------------------------------------------------
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
    """A student's screen: one store read a second; the charts follow the teacher's last publish."""
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
    s = state["settings"]
    st.caption(
        f"{escape(state['model'])} · step {state['step'] + 1} · temperature {s['temperature']:g} · "
        f"top-p {s['top_p']:g} · seed {state['seed']}"
    )
    show_state(info, teacher=False)
    if state["guess_open"] and info.guess_step:
        guess_form(code, member, info.guess_step, state)
    if st.button("Fork: continue this text in my own Generate run", key="class_fork"):
        # the teacher's text becomes this student's Generate prompt (plain text, no chat template: as the teacher's)
        st.session_state.update(
            gen_prompt=state["text"], gen_chat=False, gen_temperature=float(s["temperature"]),
            gen_top_p=float(s["top_p"]), gen_seed=int(state["seed"]), gen_url_read=True,
        )  # fmt: skip
        st.switch_page("app_pages/generate.py")


def guess_form(code: str, member: str, step: str, state: dict) -> None:
    labels = {o["id"]: o["label"] for o in state["options"]} | {SOMETHING_ELSE: "something else"}
    with st.form(f"guess_{step}"):
        st.markdown("**What will the model write next?**")
        pick = st.radio("Your guess", list(labels), format_func=labels.get, horizontal=True, key="class_guess",
                        persist_state="session")  # fmt: skip
        stated = st.slider("How likely do you think it is? (optional)", 0, 100, 0, 5, format="%d%%",
                           key="class_stated", persist_state="session")  # fmt: skip
        if st.form_submit_button("Send my guess"):
            try:
                store().answer(code, member, step, pick, stated / 100 if stated else None)
                st.session_state[f"answered_{step}"] = labels[pick]
            except ClassError as err:
                st.error(str(err))
    if f"answered_{step}" in st.session_state:
        st.caption(f"Your guess is in: {markdown_token_text(st.session_state[f'answered_{step}'])}. You can change it.")


# -- page ----------------------------------------------------------------------------------------------------------
loaded = current_model(remote_ok=True)
st.title("🧑‍🏫 Class mode")
st.markdown(lesson.TEXT["intro"])
code = normalise_code(st.query_params.get("class", ""))
teacher = st.session_state.get(TEACHER_KEY)
try:
    if teacher is None and not code:
        teacher = taken_up(loaded)
    if teacher is not None:
        teacher_view(teacher)
except ClassError as err:
    st.error(str(err))
    st.session_state.pop(TEACHER_KEY, None)
    teacher = None
if teacher is None and code:
    follow(code)
elif teacher is None:
    left, right = st.columns(2)
    with left:
        start_class(loaded)
    with right:
        st.markdown("#### Learn: join a class")
        typed = st.text_input("Class code", max_chars=12, key="class_code_typed", persist_state="session")
        if st.button("Join the class", key="class_join_code") and typed.strip():
            st.query_params["class"] = normalise_code(typed)
            st.rerun()
