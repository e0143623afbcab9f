"""Every sentence the Quantization page says about its measurements: why each precision is
(or is not) faster, what each copy converted, and how its greedy text relates to float32's.
Plain text (Markdown); the numbers come from the comparison (`inference.lessons.quantization.experiments`)."""

from __future__ import annotations

import math

from inference.core import machine
from inference.lessons.quantization.experiments import REFERENCE, PrecisionComparison, PrecisionResult

SAME_SPEED_BAND = 0.10  # timing on a shared CPU wobbles about this much between runs

# Why each precision is (or is not) faster: shown beside the measured speed.
SPEED_NOTES = {
    "float32": (
        "The reference: 4 bytes per weight. Decoding one token reads every weight once, so "
        "for a model larger than the CPU's caches the speed of decode is set mostly by how "
        "many bytes the weights take. A model of a few MB fits in the cache: then per-layer "
        "overheads dominate and fewer bytes help little."
    ),
    "bfloat16": (
        "2 bytes per weight, half the memory to read per token. It pays off on large models "
        "and on CPUs that multiply bf16 natively (AVX-512 BF16 or AMX); on small models or "
        "older CPUs bf16 can be slower than float32."
    ),
    "int8": (
        "1 byte per weight plus one scale per output row. In eager PyTorch, torchao's int8 "
        "weight-only path converts the whole int8 weight back to bf16 on every call and then "
        "runs an ordinary bf16 matrix multiply: memory is saved, but each step does the "
        "conversion on top, so it is no faster than bf16 on a CPU. A fused kernel (from "
        "torch.compile, or the int8 kernels on GPUs) converts inside the multiply and reads "
        "only the int8 bytes: that is where the speed comes from."
    ),
    "int4": (
        "Half a byte per weight plus a bf16 scale and zero point per group of inputs. "
        "torchao packs the weights for a fused CPU kernel that unpacks them inside the "
        "multiply, so a decode step reads about a quarter of bf16's weight bytes (plus the "
        "scales and zero points). Whether that makes it faster here is measured above. GPUs have "
        "such fused int4 kernels too, which is why 4-bit "
        "weight-only models are common for local serving. The price is accuracy: check the KL."
    ),
}


def departure_verdict(result: PrecisionResult) -> str:
    """A few words on how this precision's greedy text relates to float32's."""
    if result.precision == REFERENCE:
        return "the reference"
    if result.first_departure is None:
        return "same as float32"
    if result.first_departure >= len(result.greedy_tokens):
        return f"stops early, at step {result.first_departure}"
    return f"departs at step {result.first_departure}"


# Why a precision is slower or no faster than float32 on this CPU, beside the measured ratio.
SLOWER_BECAUSE = {
    "bfloat16": (
        "bf16 halves the bytes, but when the weights fit in the CPU's caches reading them is not "
        "what limits a step. What remains is extra work: the model code converts to float32 and "
        "back around every norm, and a CPU without bf16 instructions (AVX-512 BF16, AMX) also "
        "converts inside every multiply."
    ),
    "int8": (
        "torchao's int8 weight-only path in eager PyTorch has no fused kernel: on every call it "
        "turns the whole int8 weight back into a bf16 matrix, then multiplies. The memory is "
        "saved, but each step does that conversion on top of the work bf16 does."
    ),
    "int4": (
        "the int4 kernel unpacks 4-bit groups and applies their scales inside the multiply; on "
        "small matrices that bookkeeping can cost more than the bytes it saves."
    ),
}
FASTER_BECAUSE = {
    "bfloat16": (
        "it moves half the bytes, and a CPU with bf16 instructions (AVX-512 BF16, AMX) multiplies them directly."
    ),
    "int8": "moving fewer bytes per token outweighed the conversion back to bf16.",
    "int4": (
        "its fused CPU kernel unpacks the 4-bit weights inside a multiply built for one token at a time, "
        "and moves about a quarter of bf16's bytes."
    ),
}
GPU_NOTE = (
    "On a GPU the picture changes: decoding one token for one user reads every weight once and "
    "does little arithmetic with it, so its speed is set by memory bandwidth. Fused int8 and "
    "int4 kernels (in vLLM, TensorRT-LLM, llama.cpp and others) read the small integers and "
    "convert them inside the multiply, so fewer bytes per weight gives close to "
    "proportionally faster decode on large models — and lets a model fit on a card at all."
)


def speed_findings(comparison: PrecisionComparison) -> list[str]:
    """Plain sentences about the measured speeds, each with the reason behind it."""
    results = comparison.results
    reference = results[REFERENCE]
    findings = []
    findings.append(machine.weights_vs_cache(reference.weight_bytes, "This model's float32 weights"))
    if comparison.float32_row_sums:
        findings.append(
            "In this app's step engine, float32's matrix-vector products run as torch's vectorised multiply "
            "and row sum instead of the one-token matrix kernel that transformers' own forward uses "
            "(`python -m inference.bench` times the engine against transformers' `generate` on this machine). "
            "bfloat16, int8 and int4 keep their own kernels, so part of each gap below is the kernel, not the number "
            "format."
        )
    for precision, result in results.items():
        if precision == REFERENCE:
            continue
        ratio = result.decode_tokens_per_s / reference.decode_tokens_per_s
        if math.isnan(ratio):
            continue
        measured = (
            f"**{precision}** decoded {result.decode_tokens_per_s:,.0f} tokens/s, "
            f"{ratio:.2f}× float32's {reference.decode_tokens_per_s:,.0f}"
        )
        if ratio < 1 - SAME_SPEED_BAND:
            findings.append(f"{measured}: slower on this CPU, because {SLOWER_BECAUSE[precision]}")
        elif ratio > 1 + SAME_SPEED_BAND:
            findings.append(f"{measured}: faster, because {FASTER_BECAUSE[precision]}")
        else:
            findings.append(
                f"{measured}: about the same (differences under {SAME_SPEED_BAND:.0%} are timing "
                f"noise on a shared CPU). Why no clear gain: {SLOWER_BECAUSE[precision]}"
            )
    findings.append(GPU_NOTE)
    return findings


def layer_notes(comparison: PrecisionComparison) -> list[str]:
    """What was and was not converted: GPT-2's Conv1D layers, the tied lm_head, skips."""
    notes = []
    if comparison.conv1d_layers:
        notes.append(
            f"This is a GPT-2-style model: its {comparison.conv1d_layers} attention and MLP layers are "
            "`Conv1D`, not `nn.Linear` (the same matrix multiply, with the weight stored transposed). "
            "torchao only quantizes `nn.Linear`, so on their own they would stay unquantized; here each "
            "copy converts them to `nn.Linear` first, so int8 and int4 really apply to them."
        )
    for precision in ("int8", "int4"):
        result = comparison.results.get(precision)
        if result is None:
            continue
        line = f"**{precision}**: {result.quantized_layers} linear layers quantized"
        if precision == "int4":
            line += f" (one scale and zero point per group of {comparison.int4_group_size} inputs)"
        overhead = result.overhead
        if overhead.value_bytes:
            line += (
                f"; their integers take {overhead.value_bytes:,} bytes and the scales and zero points stored "
                f"beside them {overhead.scale_bytes:,} more (+{overhead.fraction:.2%}, read from the copy and "
                "counted in its weight bytes)"
            )
        if result.skipped_layers:
            kept = "; ".join(f"`{s.name}` ({s.reason})" for s in result.skipped_layers[:4])
            more = len(result.skipped_layers) - 4
            line += f"; left in bf16: {kept}" + (f" and {more} more" if more > 0 else "")
        notes.append(line + ".")
    return notes


def intro(model_name: str) -> str:
    return (
        f"The same model, **{model_name}**, stored four ways: float32 (4 bytes per weight), bfloat16 (2), "
        "int8 (1, plus a scale per row) and int4 (½, plus a scale and zero point per group). Fewer bytes means "
        "less memory and, on the right hardware, faster decoding. The price is a small change in every "
        "prediction, measured below against float32."
    )


def cost_caption(new_tokens: int, rounds: int) -> str:
    return (
        "Bytes read from the model tensors; decode speed = decode steps ÷ their forward-pass time, "
        f"greedy, {new_tokens} new tokens, best of {rounds} rounds after a warm-up."
    )


def memory_caption(int4_shrink: float) -> str:
    """`int4_shrink`: float32's weight bytes over the int4 copy's, measured from the copies."""
    return (
        "Bytes of each kind of tensor, read from the copies (int4 and int8 include their scales "
        "and zero points). Embeddings and norms stay in bf16 (only linear layers are quantized), so the int4 "
        f"copy is {int4_shrink:.1f}× smaller than float32, where 4-bit weights throughout would be 8×."
    )


def quality_caption(steps: int) -> str:
    return (
        f"Means over the {steps} steps of float32's greedy text, every precision "
        "reading the same tokens; float32 compared with itself is exactly 0 KL and 100% agreement."
    )


def step_caption(top_n: int) -> str:
    return (
        f"float32's {top_n} most likely tokens at this step and the probability each precision gives them "
        "(softmax over the full vocabulary; 'other' = everything else). ▶ = the token float32 chose."
    )


def gguf_caption(speed_rounds: int) -> str:
    return (
        "GGUF bytes are the file's size; its decode tokens/s is llama-server's own "
        f"`timings` for a greedy run of the same length (best of {speed_rounds}), relative to the GGUF f32 file "
        "on the same server. KL and top-1 agreement are computed exactly from the server's whole-vocabulary "
        "distributions at every position of the same teacher-forced text as the torchao rows."
    )


def fit_caption(labels: list[str], overhead_fraction: float, group_size: int) -> str:
    """The fit heatmap's caption; `overhead_fraction`: what the int4 copy stores beyond its integers."""
    return (
        "Parameter counts from the models' published configs (assets/public_models.json); GB = 10⁹ "
        "bytes. **Every parameter counted at the width shown**, embeddings included; the copies above keep "
        "embeddings and norms in bf16 instead. Each cell: weight size → the smallest of "
        f"{', '.join(labels)} that holds it, by the memory nvidia-smi reports for that card "
        f"(assets/accelerators.json), and what is left for the KV cache; red = none, so N of the {labels[-1]}. "
        "Scales and zero points are not counted here: the int4 copy above stores "
        f"{overhead_fraction:.2%} more than its integers for them (one bf16 scale and zero per group of "
        f"{group_size})."
    )


def fits(card_label: str | None, left_gb: float | None, cards_needed: int, largest_label: str) -> str:
    """The calculator's answer: the smallest card that holds the weights and what is left, or how many of the
    largest card they need (`card_label` None)."""
    if card_label is not None:
        return f"fits one {card_label} ({left_gb:,.1f} GB left)"
    return f"needs {cards_needed} × {largest_label}"
