"""The sentences of Training vs inference: format strings, each field filled from the result it describes (objects
passed whole: `{c.forward.median_ms}`), the comparison words from `measuring.compare`."""

from __future__ import annotations

from inference.core.tokens import markdown_token_text

DEFAULT_SENTENCE = "The little cat sat on the purple moon"

TEXT = {
    "intro": "**Inference** uses a trained model: it reads the weights and never changes them. **Training** made "
    "those weights, one step at a time, each step moving all of them. Training happens once; inference happens on "
    "every request, and that is where most of the cost of real AI goes. Here **{model}** does both, on a sentence "
    "you type.",
    "prediction": "After {context}, the model's most likely next token is {top} ({top_p}); the sentence's own last "
    "token {target} gets {target_p} (rank {rank:,}).",
    "unchanged": " **{check.passes} forward passes** of {model} over the sentence later, the weights' fingerprint (a "
    "SHA-256 of every tensor) is still **`{check.fingerprint_after:.16}…`**: all {check.tensors} tensors are equal bit "
    "for bit. Inference only reads the weights.",
    "changed": " ⚠️ After {check.passes} forward passes the fingerprint changed (`{check.fingerprint_before:.16}` → "
    "`{check.fingerprint_after:.16}`): something wrote into the weights.",
    "how_training_works": "A training step runs the same forward pass, measures how wrong it was on every token of "
    "the sentence (the loss: cross entropy), runs backward to get a gradient for every weight, and lets the optimizer "
    "move each weight. Here: this project's own training loop (`inference/training/train.py`: AdamW at its peak "
    "learning rate {lr:g}), on **your own copy** of the model. The copy every visitor shares is never trained, and "
    "nothing is saved.",
    "big_model": "{model} has {millions:,.0f} M parameters: a training step needs a gradient and AdamW's two moments "
    "for each (about four times the weights' memory) and takes seconds on this CPU, so this page takes one measured "
    "step on a copy that is dropped right after.",
    "press_train": "Press **{button}**: the chart will show the same probabilities before and after.",
    "trained": "After **{steps} training step{plural}** on this one sentence, {target} went from {p_before} to "
    "**{p_after}**, and the loss on the sentence from {loss_before:.3f} to {loss_after:.3f}. **{r.bytes_changed:,} "
    "of {r.bytes_total:,} bytes** of weights changed; the tensors moved by {least.relative_change:.2%} to "
    "{most.relative_change:.2%} of their size (median {median:.2%}), the most `{most.name}`.",
    "gained": "Gained most: {parts}.",
    "no_gain": "No token gained probability.",
    "single_step": "One training step of {model} on {tokens} tokens took **{seconds:,.1f} s** here (measured).",
    "fingerprints": "Your copy's fingerprint is now `{copy:.16}…`; the shared model's is still `{shared:.16}…` "
    "({state}).",
    "reset": "Reset: your copy's fingerprint is `{fingerprint:.16}…` again.",
    "moves": "{moved} of {tensors} tensors moved; most {most.name} ({most.relative_change:.2%} of its size), least "
    "{least.name} ({least.relative_change:.2%}).",
    "bars_before": "Before training: {bars}.",
    "bars_after": "Before → after training: {bars}.",
    "cost": "On {c.tokens} tokens a training step took {c.train_step.median_ms:,.1f} ms (median of "
    "{c.train_step.repeats}), a forward pass {c.forward.median_ms:,.1f} ms: {step_vs_pass}. The FLOPs say "
    "{flops_ratio:.0f}× ({train_mflops:,.1f} M vs {forward_mflops:,.1f} M per token, about 6N vs 2N with N = "
    "{millions:,.2f} M parameters).",
    "memory": "Inference needs the weights ({weights}) and a KV cache ({kv_cache}): {inference}. Training also needs "
    "a gradient for every weight ({gradients}), AdamW's two moments ({optimizer_moments}) and the activations kept for "
    "the backward pass ({activations}): {training}, {times:.1f}× as much.",
    "bill": "{b.name} was trained once: **{b.tokens:,} tokens** in {b.steps:,} steps, **{hours:.2f} hours on "
    "{b.cores} CPU cores** ({core_hours:.2f} core-hours).",
    "break_even": "One request ({prompt} prompt tokens, {reply} reply tokens) took {seconds:.2f} s of one core here. "
    "After {requests:,.0f} requests inference has cost as much machine time as training did; every request after that "
    "is extra, for as long as the model is used.",
    "flops": "By FLOPs alone (6N per training token against 2N per request token), {model}'s training equals "
    "**{requests:,.0f} requests** of {tokens} tokens.",
    "flops_measured": " Measured on this machine, the crossing comes {crossing} than the FLOPs say.",
    "first_look_caption": "The model's own probabilities (one forward pass, softmax over all {vocab:,} tokens), and "
    "SHA-256 digests of all {tensors} tensors (parameters and buffers) before and after {passes} forward passes.",
    "trained_caption": "Probabilities from your copy's forward pass after training; bytes compared bit for bit, tensor "
    "by tensor, against the copy's starting weights. AdamW's weight decay shrinks every matrix at every step, so even "
    "the embeddings of tokens not in the sentence change.",
    "loss_caption": "Cross entropy of your copy on the sentence's {tokens} predicted tokens, before each step and after "
    "the last. Each step took {step_ms} ms (measured).",
    "time_caption": "Wall clock on this machine, {threads} torch thread(s), interleaved; bars are medians of {repeats}, "
    "dots each repeat. A training step: loss, backward, gradient clipping, AdamW.",
    "flops_caption": "Forward: 2 × (layer weights + output layer) per token + attention (inference/core/flops.py); "
    "training: 3 × forward (the backward pass is two products per forward product). AdamW's update is left out.",
    "memory_caption": "Weights, gradients (one per trainable weight) and AdamW's two float32 moments counted from the "
    "tensors; the KV cache from the model's shape; activations are the bytes of the tensors autograd kept for the "
    "backward pass of this sentence (measured with saved-tensor hooks).",
    "break_even_caption": "Training: wall time × {cores} cores from its training_meta.json; a request: prefill + "
    "decode passes timed here on {threads} thread(s), × {threads}. Both are machine time, core-hours.",
}


def pct(p: float) -> str:
    """A probability as a percentage with enough digits to be non-zero: 98.1%, 0.0033%."""
    return f"{p:.1%}" if p >= 0.01 else f"{p * 100:.2g}%" if p >= 1e-6 else "<0.0001%"


def token(text: str) -> str:
    """A token in a sentence: bold and shown literally in Markdown."""
    return f"**{markdown_token_text(text)}**"
