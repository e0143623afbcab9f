"""Training vs inference: inference leaves the weights fixed, training moves them (on a per-session copy), what each
costs, and training once vs inference on every request."""

import statistics

import pandas as pd
import streamlit as st
import torch

from app_pages.shared import layout, models
from app_pages.shared.captions import caption
from app_pages.shared.charts import chart
from app_pages.shared.session_memo import kept_until_changed
from app_pages.shared.shared_results import measure_on_click
from app_pages.shared.sidebar import current_model
from app_pages.shared.slots import generation_slot
from inference.core.loader import encode_prompt
from inference.core.measuring import compare
from inference.core.tokens import markdown_token_text, readable_token
from inference.lessons.cost.experiments import measure_answer
from inference.lessons.training_vs_inference import cost as costs
from inference.lessons.training_vs_inference import figures, text
from inference.lessons.training_vs_inference import weights as w
from inference.lessons.training_vs_inference.text import TEXT, pct, token

COPY_KEY = "tvi_copy"  # (model name, the session's TrainingCopy): a small model's copy, kept until Reset or a new model
RESULT_KEY = "tvi_result"  # ((model name, sentence ids), TrainingResult)
KEEP_COPY_UP_TO = 30_000_000  # parameters: up to this a copy is kept and trained k steps; above, one measured step
BIG_MODEL_PASSES = 3  # inference passes of the first screen's check on a larger model (each takes ~0.1 s or more)

limits = models.limits()
loaded = current_model(needs_weights="it hashes the weights and trains a copy of them here")
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
small = info.parameters <= KEEP_COPY_UP_TO
presenter = layout.presenter()

st.title("🏋️ Training vs inference")
st.markdown(TEXT["intro"].format(model=info.name))
sentence = st.text_input(
    "A sentence: the model predicts its last token from the others",
    text.DEFAULT_SENTENCE,
    max_chars=300,
    key="tvi_text",
    persist_state="session",
)
ids = encode_prompt(tokenizer, sentence)[-limits.max_prompt_tokens :]
if len(ids) < 2:
    st.warning("Type at least two tokens: the model predicts the last one from the ones before it.")
    st.stop()
key = (info.name, tuple(ids))
target = readable_token(tokenizer, ids[-1])


def first_look():
    with generation_slot():
        before = w.next_token_distribution(model, tokenizer, ids)
        passes = w.INFERENCE_PASSES if small else BIG_MODEL_PASSES
        return before, w.run_inference_many(model, tokenizer, ids, passes)


before, check = kept_until_changed("tvi_first", key, first_look)


def bars(rows) -> str:
    """The distribution chart's bars as plain text."""
    if rows[0][2] is None:
        return TEXT["bars_before"].format(bars=", ".join(f"'{t}' {pct(b)}" for t, b, _ in rows))
    return TEXT["bars_after"].format(bars=", ".join(f"'{t}' {pct(b)} → {pct(a)}" for t, b, a in rows))


# -- 1. inference ----------------------------------------------------------------------------------------------------
st.subheader("1. Inference reads the weights and leaves them as they were")
context = tokenizer.decode(ids[:-1], skip_special_tokens=True)
prediction = dict(
    context=f"*{markdown_token_text(context)}*",
    top=token(readable_token(tokenizer, before.top_ids[0])),
    top_p=f"{float(before.probs[before.top_ids[0]]):.1%}",
    target=token(target),
    target_p=pct(before.target_probability),
    rank=int((before.probs > before.probs[before.target_id]).sum()) + 1,
)
said = TEXT["changed" if check.changed else "unchanged"].format(check=check, model=info.name)
st.markdown(TEXT["prediction"].format(**prediction) + said)
rows = w.chart_rows(tokenizer, before, None)
chart(figures.distribution_figure(rows, presenter), key="tvi_before", text=bars(rows))
caption("exact", TEXT["first_look_caption"].format(vocab=len(before.probs), tensors=check.tensors, passes=check.passes))

# -- 2. training -----------------------------------------------------------------------------------------------------
st.subheader("2. Training moves every weight")
st.markdown(TEXT["how_training_works"].format(lr=w.LEARNING_RATE))
stored = st.session_state.get(RESULT_KEY)
result = stored[1] if stored is not None and stored[0] == key else None
button = "Train" if small else "Take one measured training step"
reset = False
if small:
    cells = layout.control_row(3)
    steps = cells[0].number_input("Training steps", 1, 20, 3, key="tvi_steps", persist_state="session")
    train = cells[1].button(f"Train {steps} step{'s' * (steps != 1)}", key="tvi_train", type="primary")
    reset = cells[2].button("Reset", key="tvi_reset", help="Your copy's weights back to the trained model's")
else:
    steps = 1
    train = st.button(button, key="tvi_train", type="primary")
    st.markdown(TEXT["big_model"].format(model=info.name, millions=info.parameters / 1e6))
if reset:
    kept = st.session_state.get(COPY_KEY)
    if kept is not None and kept[0] == info.name:
        kept[1].reset()
        st.success(TEXT["reset"].format(fingerprint=w.fingerprint(kept[1].model)))
    st.session_state.pop(RESULT_KEY, None)
    result = None
if train:
    with generation_slot(), st.spinner("Training your copy…"):
        kept = st.session_state.get(COPY_KEY)
        if kept is None or kept[0] != info.name:
            kept = (info.name, w.TrainingCopy.of(model))
        elif result is None and kept[1].steps:  # a new sentence: start from the trained model again
            kept[1].reset()
        result = w.train_and_compare(kept[1], tokenizer, ids, int(steps))
        if small:
            st.session_state[COPY_KEY] = kept
        else:
            st.session_state.pop(COPY_KEY, None)  # a 135M copy is not kept per visitor
        st.session_state[RESULT_KEY] = (key, result)

if result is None:
    st.info(TEXT["press_train"].format(button=button))
else:
    taken = len(result.losses) - 1
    ranked = sorted(result.changes, key=lambda c: c.relative_change)
    moved = dict(least=ranked[0], most=ranked[-1], median=statistics.median(c.relative_change for c in ranked))
    p_moved = dict(p_before=pct(before.target_probability), p_after=pct(result.after.target_probability))
    p_moved.update(loss_before=result.losses[0], loss_after=result.losses[-1])
    st.markdown(
        TEXT["trained"].format(
            steps=taken, plural="s" * (taken != 1), target=token(target), r=result, **p_moved, **moved
        )
    )
    rows = w.chart_rows(tokenizer, before, result.after)
    chart(figures.distribution_figure(rows, presenter), key="tvi_after", text=bars(rows))
    rises = w.gains(tokenizer, before, result.after)
    st.markdown(
        TEXT["gained" if rises else "no_gain"].format(parts=", ".join(f"{token(t)} +{pct(g)}" for t, g in rises))
    )
    if not small:
        seconds = result.step_ms[-1] / 1000
        st.markdown(TEXT["single_step"].format(model=info.name, tokens=len(ids) - 1, seconds=seconds))
    shared_now = w.fingerprint(model)
    state = "unchanged" if shared_now == check.fingerprint_before else "CHANGED"
    st.markdown(TEXT["fingerprints"].format(copy=result.fingerprint_after, shared=shared_now, state=state))
    caption("exact", TEXT["trained_caption"])
    with st.expander(f"Where the weights moved, tensor by tensor, and the loss over {taken} step{'s' * (taken != 1)}"):
        n_moved = sum(c.relative_change > 0 for c in ranked)
        said = TEXT["moves"].format(moved=n_moved, tensors=len(ranked), **moved)
        chart(figures.change_heatmap(result.changes, presenter), key="tvi_heatmap", text=said)
        caption("exact", "‖after − before‖ ÷ ‖before‖ of every parameter tensor of your copy, in percent.")
        chart(figures.loss_figure(result.losses, presenter), key="tvi_loss")
        step_ms = ", ".join(f"{ms:,.0f}" for ms in result.step_ms)
        caption("exact", TEXT["loss_caption"].format(tokens=len(ids) - 1, step_ms=step_ms))

# -- 3. cost of a step -----------------------------------------------------------------------------------------------
with st.expander("3. What a step costs: a training step is several forward passes' work, and 4× the memory"):
    repeats = costs.REPEATS if small else 3
    cost = measure_on_click(
        "Measure a pass and a step",
        "tvi_measure",
        ("tvi_cost", info.name, tuple(ids)),
        lambda progress: costs.measure_step_cost(model, tokenizer, ids, repeats, progress=progress),
        f"Press **Measure a pass and a step** ({repeats} forward passes and {repeats} training steps on your "
        "sentence, on a copy that is dropped afterwards).",
    )
    if cost is not None:
        said = TEXT["cost"].format(
            c=cost,
            step_vs_pass=compare(cost.train_step, cost.forward).words(more="longer", less="shorter"),
            flops_ratio=cost.flops_train / cost.flops_forward,
            train_mflops=cost.flops_train_per_token / 1e6,
            forward_mflops=cost.flops_forward_per_token / 1e6,
            millions=cost.parameters / 1e6,
        )
        chart(figures.step_time_figure(cost, presenter), key="tvi_time", text=said)
        caption("measured", TEXT["time_caption"].format(threads=torch.get_num_threads(), repeats=cost.forward.repeats))
        cells = layout.metric_cells(2)
        cells[0].metric("FLOPs per token, inference", f"{cost.flops_forward_per_token / 1e6:,.2f} M")
        cells[1].metric("FLOPs per token, training", f"{cost.flops_train_per_token / 1e6:,.2f} M")
        caption("exact", TEXT["flops_caption"])
        mem = cost.memory
        parts = {**vars(mem), "inference": mem.inference, "training": mem.training}
        said = TEXT["memory"].format(
            times=mem.training / mem.inference, **{k: f"{v / 2**20:,.1f} MiB" for k, v in parts.items()}
        )
        chart(figures.memory_figure(mem, presenter), key="tvi_memory", text=said)
        caption("exact", TEXT["memory_caption"])

# -- 4. once vs every request ----------------------------------------------------------------------------------------
bill = costs.bundled_training_bill()
with st.expander(f"4. Once vs every request: {bill.name} trained once, in {bill.seconds / 3600:.1f} hours"):
    hours = bill.seconds / 3600
    st.markdown(TEXT["bill"].format(b=bill, hours=hours, core_hours=hours * bill.cores))
    caption("measured", f"From {bill.source} (and its training_log.csv), written by the training run itself.")
    c1, c2 = layout.side_by_side(2)
    prompt = c1.slider("Prompt tokens per request", 8, 256, 100, step=8, key="tvi_prompt", persist_state="session")
    reply = c2.slider("Reply tokens per request", 2, 256, 100, key="tvi_reply", persist_state="session")
    bundled = models.bundled_model()
    answer = measure_on_click(
        "Measure one request",
        "tvi_request",
        ("tvi_request", bill.name, prompt, reply),
        lambda progress: measure_answer(bundled.model, bundled.tokenizer, prompt, reply),
        f"Press **Measure one request** (one greedy answer of {bill.name}: prefill, then {reply} decode passes).",
    )
    requests = None
    if answer is not None:
        threads = torch.get_num_threads()
        requests = costs.requests_to_match_by_time(bill, answer.total_ms, threads)
        said = TEXT["break_even"].format(
            prompt=prompt, reply=answer.reply_tokens, seconds=answer.total_ms / 1000, requests=requests
        )
        hours = bill.seconds * bill.cores / 3600
        figure = figures.break_even_figure(hours, answer.total_ms * threads / 1000, requests, presenter)
        chart(figure, key="tvi_break_even", text=said)
        caption("measured", TEXT["break_even_caption"].format(cores=bill.cores, threads=threads))
    tokens = prompt + reply
    by_flops = costs.requests_to_match_by_flops(bill.tokens, tokens)
    said = TEXT["flops"].format(model=bill.name, requests=by_flops, tokens=tokens)
    if requests is not None:
        crossing = compare(by_flops, requests).words(more="earlier", less="later")
        said += TEXT["flops_measured"].format(crossing=crossing)
    st.markdown(said)
    column = f"requests of {tokens} tokens = its training FLOPs"
    table = [
        {
            "model": b.name,
            "training tokens": f"{b.tokens / 1e12:,.1f} T",
            "GPU-hours": "—" if b.accelerator_hours is None else f"{b.accelerator_hours:,.0f}",
            column: f"{costs.requests_to_match_by_flops(b.tokens, tokens):,.0f}",
        }
        for b in costs.PUBLISHED
    ]
    st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
    caption(
        "published",
        "Training figures: " + "; ".join(f"{b.name}: {b.source}" for b in costs.PUBLISHED) + ". "
        "Requests computed exactly from them: 3 × training tokens ÷ tokens per request.",
    )
