"""Compare: two settings (or two models) on the same random draws, so every difference in the
text is caused by the settings, never by luck."""

import json

import streamlit as st

from app_pages.shared import compare_controls, layout, models
from app_pages.shared import sampler_controls as controls
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.compare_controls import PREFIX, SIDES
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from app_pages.shared.url_state import read_url_once
from inference.core.bundled import bundled_models
from inference.core.forward import eos_token_ids
from inference.core.prompting import opening_prompt, prepare_prompt
from inference.core.quantize import quantized_copy
from inference.core.run import SEED_MAX
from inference.core.tokens import markdown_token_text, readable_tokens
from inference.lessons import glossary
from inference.lessons.compare import figures as cf
from inference.lessons.compare import shared_draws as compare
from inference.lessons.compare.shared_draws import BOOTSTRAP_RESAMPLES
from inference.lessons.compare.text import TEXT

URL_PREFIX = {"A": "a_", "B": "b_"}
DEFAULTS = {
    "A": {"temperature": 0.8, "top_p": 0.95},
    "B": {"temperature": 0.8, "min_p": 0.1, "order_preset": "llama.cpp default"},
}
PAGE_DEFAULTS = {"cmp_seed": 0, "cmp_max_new": 60, "cmp_seeds": 100}  # the prompt: the model's opening prompt
SEED_CHOICES = (20, 50, 100, 200)
MULTI_NEW_TOKENS = 48  # per run in the many-seed comparison: long enough to loop, short enough to run in seconds
PRECISIONS = ("float32", "bfloat16", "int8", "int4")

loaded = current_model()
tokenizer = loaded.tokenizer
opening = opening_prompt("compare", loaded.info.name)
PAGE_DEFAULTS.update(cmp_prompt=opening.text, cmp_chat=opening.chat)
presenter = layout.presenter()
limits = models.limits()


@st.cache_resource(max_entries=6, show_spinner=False)
def precision_model(model_key: str, precision: str, _model):
    """A bfloat16/int8/int4 copy of the loaded model, shared by every visitor (the original is never changed)."""
    return quantized_copy(_model, precision).model


@st.cache_data(ttl=300, show_spinner=False)
def same_vocabulary_models(vocab: int, loaded_name: str) -> list[tuple[str, str]]:
    """Other bundled models than `loaded_name` with this vocabulary (the same token ids, so the same draws mean
    the same thing), read from their config.json: nothing is loaded until a column picks one. Cached for every
    visitor, so everything it reads is in its arguments (another visitor's model must not decide this list)."""
    out = []
    for m in bundled_models():
        config = json.loads((m.folder / "config.json").read_text())
        if m.name != loaded_name and config.get("vocab_size") == vocab:
            out.append((m.name, m.source))
    return out


def model_choices() -> list[str]:
    vocab = loaded.model.get_output_embeddings().weight.shape[0]
    names = [f"{loaded.info.name} · {p}" for p in PRECISIONS]
    return names + [f"{name} · float32" for name, _ in same_vocabulary_models(vocab, loaded.info.name)]


def model_for(choice: str):
    name, precision = choice.rsplit(" · ", 1)
    if name == loaded.info.name:
        return loaded.model if precision == "float32" else precision_model(loaded.info.name, precision, loaded.model)
    source = dict(same_vocabulary_models(loaded.model.get_output_embeddings().weight.shape[0], loaded.info.name))[name]
    return models.cached_model(source, "float32", False).model


def read_url(choices: list[str]) -> list[str]:
    """Defaults every run (Streamlit forgets a widget's value on a run of another page); a link's values once."""
    first = not st.session_state.get("cmp_url_read")
    for side in SIDES:
        controls.set_defaults(PREFIX[side], DEFAULTS[side])
    url = {"prompt": ("cmp_prompt", str), "seed": ("cmp_seed", int), "max": ("cmp_max_new", int)}
    url |= {f"{URL_PREFIX[side]}model": (f"cmp_model_{side}", str) for side in SIDES}
    models_here = {f"cmp_model_{side}": (choices, "is not a model of this page; using the default.") for side in SIDES}
    problems = read_url_once(
        "cmp_url_read", url, PAGE_DEFAULTS | dict.fromkeys(models_here, choices[0]),
        {"cmp_seed": (0, SEED_MAX), "cmp_max_new": (1, limits.max_new_tokens)}, choices=models_here,
    )  # fmt: skip
    for side in SIDES if first else ():
        problems += controls.read_url(PREFIX[side], URL_PREFIX[side], st.query_params)
    return problems


choices = model_choices()  # once a rerun: it reads the bundled models' configs
problems = read_url(choices)
st.title("⚖️ Same luck, two settings")
st.markdown(TEXT["intro"])
for problem in problems:
    st.warning(problem)

chat, now_line = compare_controls.draw(choices, loaded.info.has_chat_template, limits.max_new_tokens)
settings = {}
for side in SIDES:
    try:
        settings[side] = controls.settings_from_state(PREFIX[side])
    except ValueError as err:
        st.warning(f"{side}: {err}")
        st.stop()
if now_line is not None:
    compare_controls.name_settings(now_line, chat, settings)

prepared = prepare_prompt(
    tokenizer, st.session_state.cmp_prompt, chat, loaded.info.context, limits, int(st.session_state.cmp_max_new)
)
for note in prepared.notes:
    st.info(note)
if prepared.error:
    st.warning(prepared.error)
    st.stop()
seed, max_new = int(st.session_state.cmp_seed), min(int(st.session_state.cmp_max_new), prepared.max_new_tokens)

query = {"prompt": st.session_state.cmp_prompt[:500], "seed": str(seed), "max": str(max_new)}
for side in SIDES:
    query.update(controls.url_values(PREFIX[side], URL_PREFIX[side], settings[side]))
    if st.session_state[f"cmp_model_{side}"] != choices[0]:
        query[f"{URL_PREFIX[side]}model"] = st.session_state[f"cmp_model_{side}"]
st.query_params.from_dict(query)

# -- one seed --------------------------------------------------------------------------------
sides = (settings["A"], settings["B"], st.session_state.cmp_model_A, st.session_state.cmp_model_B)
run_key = (tuple(prepared.ids), seed, max_new, *sides)
pairs = st.session_state.setdefault("cmp_pairs", {})
lessons = st.session_state.setdefault("cmp_lessons", {})  # re-reading every step: once a pair, not every rerun
if run_key not in pairs:
    with generation_slot():
        model_a, model_b = model_for(st.session_state.cmp_model_A), model_for(st.session_state.cmp_model_B)
        pairs.clear()  # one pair per session is all the page shows
        lessons.clear()
        pairs[run_key] = compare.shared_draw_pair(
            model_a, model_b, tokenizer, prepared.ids, settings["A"], settings["B"], seed, max_new
        )
        lessons[run_key] = compare.order_lesson(pairs[run_key].trace_a, settings["A"])
pair = pairs[run_key]
parting = pair.parting
text_columns = st.columns(2)
for side, column, trace in zip(SIDES, text_columns, (pair.trace_a, pair.trace_b)):
    with column:
        # presenter mode: the model is in the line under the folded settings (a second line pushed the text down)
        model_named = "" if presenter else f" · {st.session_state[f'cmp_model_{side}']}"
        st.markdown(f"**{side}**{model_named} · {len(trace.records)} tokens")
        st.markdown(
            cf.parting_html(
                tokenizer,
                trace.prompt_ids,
                pair.trace_a.generated_ids,
                pair.trace_b.generated_ids,
                None if parting is None else parting.step,
                side,
            ),
            unsafe_allow_html=True,
        )
if parting is None:
    st.success(TEXT["same_text"].format(steps=glossary.plural(len(pair.trace_a.records), "step")))
else:
    st.info(TEXT["parted"].format(step=parting.step, reason=parting.reason))
    # One under the other: each chart needs the page's width for its token labels.
    chart(cf.final_distributions(parting, tokenizer, presenter), width="stretch", key="cmp_finals")
    caption("exact", TEXT["finals"])
    chart(cf.shared_u_cdfs(parting, tokenizer, presenter), width="stretch", key="cmp_cdfs")
    caption("exact", TEXT["shared_u"].format(u=parting.u))

for side, trace in zip(SIDES, (pair.trace_a, pair.trace_b)):
    if settings[side].mirostat and trace.records:
        chart(cf.mirostat_figure(trace.records, side, presenter), width="stretch", key=f"cmp_miro_{side}")
        caption("exact", TEXT["mirostat"].format(side=side))

# -- the order lesson --------------------------------------------------------------------------
st.subheader("Same settings, two orders")
lesson = lessons[run_key]
if lesson is None:
    st.markdown(TEXT["orders_agree"].format(steps=glossary.plural(len(pair.trace_a.records), "step")))
else:
    kept_t, kept_l = (view.kept[view.final_stage] for view in (lesson.transformers, lesson.llama_cpp))
    st.markdown(
        TEXT["orders_differ"].format(
            step=lesson.step,
            kept_t=kept_t,
            kept_l=kept_l,
            t=settings["A"].temperature,
            only_t=lesson.only_transformers,
            only_l=lesson.only_llama_cpp,
        )
    )
    chart(cf.order_lesson_figure(lesson, tokenizer, presenter), width="stretch", key="cmp_order")
    caption("exact", TEXT["order"])

# -- many seeds --------------------------------------------------------------------------------
st.subheader("Over many seeds")
stop_ids = sorted(eos_token_ids(loaded.model, tokenizer))
stops = " or ".join(f"**{markdown_token_text(t)}**" for t in readable_tokens(tokenizer, stop_ids))
until = TEXT["until_stop" if stops else "until_none"].format(model=loaded.info.name, stops=stops)
many_intro = TEXT["many_intro"].format(model=loaded.info.name, until=until)
st.markdown(many_intro)
st.caption(glossary.note(*glossary.terms_in(many_intro), "bootstrap"))  # the jargon where it first appears
count = st.select_slider("Seeds", SEED_CHOICES, key="cmp_seeds", persist_state="session")
seeds = list(range(int(count)))
multi_key = (
    "compare",
    loaded.info.name,
    tuple(prepared.ids),
    tuple(seeds),
    MULTI_NEW_TOKENS,
    settings["A"],
    settings["B"],
    st.session_state.cmp_model_A,
    st.session_state.cmp_model_B,
)


# resolved here, in the script (cached since the single run above): the measurement runs in a background thread,
# which must not read session state
model_a, model_b = model_for(st.session_state.cmp_model_A), model_for(st.session_state.cmp_model_B)


def measure(progress):
    return compare.many_seeds(
        model_a,
        model_b,
        tokenizer,
        loaded.model,
        prepared.ids,
        settings["A"],
        settings["B"],
        seeds,
        MULTI_NEW_TOKENS,
        progress,
    )


result = measure_on_click(
    f"Run A and B on {len(seeds)} seeds",
    "cmp_many",
    multi_key,
    measure,
    TEXT["not_yet"].format(seeds=len(seeds), max_new=MULTI_NEW_TOKENS),
    background=True,
)
if result is not None:
    verdicts = result.verdicts()
    if verdicts:
        for line in verdicts:
            st.markdown(f"- **{line}**")
    else:
        st.markdown(f"- {TEXT['no_verdict'].format(seeds=len(result.seeds))}")
    chart(cf.interval_figure(result.summary, presenter), width="stretch", key="cmp_intervals")
    capped = {
        f"capped_{s}": int((~stats["stopped"]).sum()) for s, stats in (("a", result.stats_a), ("b", result.stats_b))
    }
    numbers = {"seeds": len(result.seeds), "max_new": MULTI_NEW_TOKENS, "model": loaded.info.name}
    length = TEXT["length_left_out" if result.every_run_capped else "length_capped"].format(**numbers, **capped)
    numbers |= {"seconds": result.seconds, "resamples": BOOTSTRAP_RESAMPLES, "length": length}
    caption("simulated", TEXT["intervals"].format(**numbers))
    hist = layout.side_by_side(2)
    for i, (metric, title) in enumerate(result.metrics.items()):
        with hist[i % 2]:
            chart(
                cf.distributions_figure(result.stats_a, result.stats_b, metric, title, presenter),
                width="stretch",
                key=f"cmp_hist_{metric}",
            )
    caption("simulated", TEXT["spread"])
