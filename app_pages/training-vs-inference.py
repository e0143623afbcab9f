"""Training vs inference: inference leaves the weights fixed, training moves them (on a per-session copy), what each
costs, and training once vs inference on every request."""

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
from inference.core.tokens import readable_token
from inference.lessons.cost.experiments import measure_answer
from inference.lessons.training_vs_inference import figures, text
from inference.lessons.training_vs_inference.cost import (
    PUBLISHED,
    REPEATS,
    bundled_training_bill,
    measure_step_cost,
    requests_to_match_by_flops,
    requests_to_match_by_time,
)
from inference.lessons.training_vs_inference.weights import (
    INFERENCE_PASSES,
    LEARNING_RATE,
    TrainingCopy,
    chart_rows,
    fingerprint,
    gains,
    next_token_distribution,
    run_inference_many,
    train_and_compare,
)

COPY_KEY = "tvi_copy"  # (model name, the session's TrainingCopy): a small model's copy, kept until Reset or a new model
RESULT_KEY = "tvi_result"  # ((model name, sentence ids), TrainingResult)
KEEP_COPY_UP_TO = 30_000_000  # parameters: up to this a copy is kept and trained k steps; above, one measured step
BIG_MODEL_PASSES = 3  # inference passes of the first screen's check on a larger model (each takes ~0.1 s or more)

limits = models.limits()
loaded = current_model(needs_weights="it hashes the weights and trains a copy of them here")
model, tokenizer, info = loaded.model, loaded.tokenizer, loaded.info
small = info.parameters <= KEEP_COPY_UP_TO

st.title("🏋️ Training vs inference")
st.markdown(
    "**Inference** uses a trained model: it reads the weights and never changes them. **Training** made those "
    "weights, a small nudge to every one of them per step. Training happens once; inference happens on every request, "
    f"and that is where most of the cost of real AI goes. Here **{info.name}** does both, on a sentence you type."
)
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
context = tokenizer.decode(ids[:-1], skip_special_tokens=True)


def first_look():
    with generation_slot():
        before = next_token_distribution(model, tokenizer, ids)
        return before, run_inference_many(model, ids, INFERENCE_PASSES if small else BIG_MODEL_PASSES)


before, check = kept_until_changed("tvi_first", key, first_look)

# -- 1. inference ----------------------------------------------------------------------------------------------------
st.subheader("1. Inference reads the weights and leaves them as they were")
st.markdown(text.prediction_sentence(before, context, target) + " " + text.inference_sentence(check, info.name))
rows = chart_rows(tokenizer, before, None)
chart(figures.distribution_figure(rows, layout.presenter()), key="tvi_before", text=text.bars_sentence(rows))
caption(
    "exact",
    f"The model's own probabilities (one forward pass, softmax over all {len(before.probs):,} tokens), and SHA-256 "
    f"digests of all {check.tensors} tensors (parameters and buffers) before and after {check.passes} forward passes.",
)

# -- 2. training -----------------------------------------------------------------------------------------------------
st.subheader("2. Training moves every weight")
st.markdown(
    "A training step runs the same forward pass, measures how wrong it was on every token of the sentence (the loss: "
    "cross entropy), runs backward to get a gradient for every weight, and lets the optimizer move each weight a "
    f"little. Here: this project's own loss and optimizer (`inference/training/train.py`: AdamW at its peak learning "
    f"rate {LEARNING_RATE:g}), on **your own copy** of the model. The copy every visitor shares is never trained, and "
    "nothing is saved."
)
stored = st.session_state.get(RESULT_KEY)
result = stored[1] if stored is not None and stored[0] == key else None
if small:
    cells = layout.control_row(3)
    steps = cells[0].number_input("Training steps", 1, 20, 3, key="tvi_steps", persist_state="session")
    train = cells[1].button(f"Train {steps} step{'s' if steps != 1 else ''}", key="tvi_train", type="primary")
    reset = cells[2].button("Reset", key="tvi_reset", help="Your copy's weights back to the trained model's")
else:
    steps = 1
    train = st.button("Take one measured training step", key="tvi_train", type="primary")
    reset = False
    st.markdown(
        f"{info.name} has {info.parameters / 1e6:,.0f} M parameters: a training step needs a gradient and AdamW's two "
        "moments for each (about four times the weights' memory) and takes seconds on this CPU, so this page takes one "
        "measured step on a copy that is dropped right after."
    )
if reset:
    kept = st.session_state.get(COPY_KEY)
    if kept is not None and kept[0] == info.name:
        kept[1].reset()
        st.success(f"Reset: your copy's fingerprint is `{text.short(fingerprint(kept[1].model))}…` again.")
    st.session_state.pop(RESULT_KEY, None)
    result = None
if train:
    with generation_slot(), st.spinner("Training your copy…"):
        kept = st.session_state.get(COPY_KEY)
        if kept is None or kept[0] != info.name:
            kept = (info.name, TrainingCopy.of(model))
        elif result is None and kept[1].steps:  # a new sentence: start from the trained model again
            kept[1].reset()
        result = train_and_compare(kept[1], tokenizer, ids, int(steps))
        if small:
            st.session_state[COPY_KEY] = kept
        else:
            st.session_state.pop(COPY_KEY, None)  # a 135M copy is not kept per visitor
        st.session_state[RESULT_KEY] = (key, result)

if result is None:
    st.info(
        f"Press **{'Train' if small else 'Take one measured training step'}**: the chart will show the same "
        "probabilities before and after."
    )
else:
    changes = result.changes
    st.markdown(text.training_sentence(before, result.after, target, result.losses, changes))
    rows = chart_rows(tokenizer, before, result.after)
    chart(figures.distribution_figure(rows, layout.presenter()), key="tvi_after", text=text.bars_sentence(rows))
    st.markdown(text.gained_sentence(gains(tokenizer, before, result.after)))
    if not small:
        st.markdown(text.single_step_sentence(info.name, result.step_ms[-1], len(ids) - 1))
    shared_now = fingerprint(model)
    st.markdown(
        f"Your copy's fingerprint is now `{text.short(result.fingerprint_after)}…`; the shared model's is still "
        f"`{text.short(shared_now)}…`{' (unchanged)' if shared_now == check.fingerprint_before else ' (CHANGED)'}."
    )
    caption(
        "exact",
        "Probabilities from your copy's forward pass after training; bytes compared bit for bit, tensor by tensor, "
        "against the copy's starting weights. AdamW's weight decay shrinks every matrix a little at every step, so "
        "even the embeddings of tokens not in the sentence change.",
    )
    taken = len(result.losses) - 1
    with st.expander(f"Where the weights moved, tensor by tensor, and the loss over {taken} step{'s' * (taken != 1)}"):
        chart(figures.change_heatmap(changes, layout.presenter()), key="tvi_heatmap", text=text.moves_sentence(changes))
        caption("exact", "‖after − before‖ ÷ ‖before‖ of every parameter tensor of your copy, in percent.")
        chart(figures.loss_figure(result.losses, layout.presenter()), key="tvi_loss")
        caption(
            "exact",
            f"Cross entropy of your copy on the sentence's {len(ids) - 1} predicted tokens, before each step and "
            f"after the last. Each step took {', '.join(f'{ms:,.0f}' for ms in result.step_ms)} ms (measured).",
        )

# -- 3. cost of a step -----------------------------------------------------------------------------------------------
with st.expander("3. What a step costs: a training step is several forward passes' work, and 4× the memory"):
    repeats = REPEATS if small else 3
    cost = measure_on_click(
        "Measure a pass and a step",
        "tvi_measure",
        ("tvi_cost", info.name, tuple(ids)),
        lambda progress: measure_step_cost(model, ids, repeats, progress=progress),
        f"Press **Measure a pass and a step** ({repeats} forward passes and {repeats} training steps on your "
        "sentence, on a copy that is dropped afterwards).",
    )
    if cost is not None:
        chart(figures.step_time_figure(cost, layout.presenter()), key="tvi_time", text=text.cost_sentence(cost))
        caption(
            "measured",
            f"Wall clock on this machine, {torch.get_num_threads()} torch thread(s), interleaved; bars are medians of "
            f"{cost.forward.repeats}, dots each repeat. A training step: loss, backward, gradient clipping, AdamW.",
        )
        cells = layout.metric_cells(2)
        cells[0].metric("FLOPs per token, inference", f"{cost.flops_forward_per_token / 1e6:,.2f} M")
        cells[1].metric("FLOPs per token, training", f"{cost.flops_train_per_token / 1e6:,.2f} M")
        caption(
            "exact",
            "Forward: 2 × (layer weights + output layer) per token + attention (inference/core/flops.py); training: "
            "3 × forward (the backward pass is two products per forward product). AdamW's update is left out.",
        )
        chart(
            figures.memory_figure(cost.memory, layout.presenter()),
            key="tvi_memory",
            text=text.memory_sentence(cost.memory),
        )
        caption(
            "exact",
            "Weights, gradients (one per trainable weight) and AdamW's two float32 moments counted from the tensors; "
            "the KV cache from the model's shape; activations are the bytes of the tensors autograd kept for the "
            "backward pass of this sentence (measured with saved-tensor hooks).",
        )

# -- 4. once vs every request ----------------------------------------------------------------------------------------
bill = bundled_training_bill()
with st.expander(f"4. Once vs every request: {bill.name} trained once, in {bill.seconds / 3600:.1f} hours"):
    st.markdown(text.bill_sentence(bill))
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
    if answer is not None:
        threads = torch.get_num_threads()
        requests = requests_to_match_by_time(bill, answer.total_ms, threads)
        hours = bill.seconds * bill.cores / 3600
        sentence_text = text.break_even_sentence(bill, answer.total_ms, prompt, answer.reply_tokens, requests)
        chart(
            figures.break_even_figure(hours, answer.total_ms * threads / 1000, requests, layout.presenter()),
            key="tvi_break_even",
            text=sentence_text,
        )
        caption(
            "measured",
            f"Training: wall time × {bill.cores} cores from its training_meta.json; a request: prefill + decode "
            f"passes timed here on {threads} thread(s), × {threads}. Both are machine time, core-hours.",
        )
    flops_requests = requests_to_match_by_flops(bill.tokens, prompt + reply)
    measured = None if answer is None else requests
    st.markdown(text.flops_sentence(bill, flops_requests, prompt + reply, measured))
    rows = [
        {
            "model": b.name,
            "training tokens": f"{b.tokens / 1e12:,.1f} T",
            "GPU-hours": "—" if b.accelerator_hours is None else f"{b.accelerator_hours:,.0f}",
            f"requests of {prompt + reply} tokens = its training FLOPs": f"{requests_to_match_by_flops(b.tokens, prompt + reply):,.0f}",
        }
        for b in PUBLISHED
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    caption(
        "published",
        "Training figures: " + "; ".join(f"{b.name}: {b.source}" for b in PUBLISHED) + ". "
        "Requests computed exactly from them: 3 × training tokens ÷ tokens per request.",
    )
