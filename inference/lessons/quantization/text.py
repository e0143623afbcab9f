"""Every sentence the Quantization page says about its measurements: why each precision is
(or is not) faster, what each copy converted, and how its greedy text relates to float32's.
Plain text (Markdown); the numbers come from the comparison (`inference.lessons.quantization.experiments`)."""

from __future__ import annotations

import math

from inference.core import machine
from inference.core.machine import describe_bytes
from inference.lessons.quantization.experiments import REFERENCE, PrecisionComparison, PrecisionResult, speed_ratio

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


# Why a precision is slower or no faster than float32 on this CPU, beside the measured ratio. Keyed by where
# float32's weights live between decode steps ("cache", "memory", or "unknown" when the machine does not say):
# a reason about bytes read from memory is only given when they do not fit in the cache.
SLOWER_BECAUSE = {
    "bfloat16": {
        "cache": (
            "bf16 halves the bytes, but float32's weights already stay in this CPU's cache, so reading them is "
            "not what limits a step. What remains is extra work: the model code converts to float32 and back "
            "around every norm, and a CPU without bf16 instructions (AVX-512 BF16, AMX) also converts inside "
            "every multiply."
        ),
        "memory": (
            "bf16 halves the bytes read from memory, but the model code converts to float32 and back around "
            "every norm, and a CPU without bf16 instructions (AVX-512 BF16, AMX) also converts inside every "
            "multiply: here that extra work cost more than the bytes saved."
        ),
    },
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
    "bfloat16": {
        "cache": (
            "this CPU multiplies bf16 with its own instructions (AVX-512 BF16 or AMX), twice as many numbers "
            "per instruction as float32. Not because fewer bytes come from memory: float32's weights already "
            "stay in the cache"
        ),
        "memory": (
            "it reads half the bytes from memory per token, and a CPU with bf16 instructions (AVX-512 BF16, "
            "AMX) multiplies them directly"
        ),
    },
    "int8": {
        "cache": (
            "its bf16 multiply ran faster than float32's path here, even with the conversion back to bf16 on "
            "top. Not because fewer bytes come from memory: float32's weights already stay in the cache"
        ),
        "memory": "reading a quarter of float32's bytes from memory outweighed the conversion back to bf16",
    },
    "int4": {
        "cache": (
            "its fused CPU kernel, built for one token at a time, unpacks the 4-bit weights inside the "
            "multiply and does less work per weight than float32's path. Not because fewer bytes come from "
            "memory: float32's weights already stay in the cache"
        ),
        "memory": (
            "its fused CPU kernel unpacks the 4-bit weights inside a multiply built for one token at a time, "
            "and reads about an eighth of float32's bytes from memory"
        ),
    },
}


def weights_home(weight_bytes: int, cache_bytes: int | None) -> str:
    """Where weights of this size stay between decode steps on this machine: "cache", "memory" or "unknown"."""
    if cache_bytes is None:
        return "unknown"
    return "cache" if weight_bytes <= cache_bytes else "memory"


def _reason(reasons, home: str) -> str:
    """The reason for where float32's weights live; with an unknown cache, the memory reading, said as an if."""
    if isinstance(reasons, str):
        return reasons
    if home == "unknown":
        return reasons["memory"] + " (if the weights do not fit in this machine's cache, whose size it does not report)"
    return reasons[home]


GPU_NOTE = (
    "On a GPU the picture changes: decoding one token for one user reads every weight once and "
    "does little arithmetic with it, so its speed is set by memory bandwidth. Fused int8 and "
    "int4 kernels (in vLLM, TensorRT-LLM, llama.cpp and others) read the small integers and "
    "convert them inside the multiply, so fewer bytes per weight gives close to "
    "proportionally faster decode on large models — and lets a model fit on a card at all."
)


def cache_sentence(weight_bytes: int, cache_bytes: int | None) -> str:
    """Where float32's weights stay between decode steps: the premise every reason below is chosen by."""
    size = f"This model's float32 weights take {describe_bytes(weight_bytes)}"
    if cache_bytes is None:
        return (
            f"{size}; this machine does not report its cache size, so whether they stay in the CPU's cache "
            "between decode steps is unknown here."
        )
    where = f"this machine's last-level cache holds {describe_bytes(cache_bytes)} (as the system reports it)"
    if weight_bytes <= cache_bytes:
        return (
            f"{size} and {where}: they fit, so between decode steps they can stay in the cache, and a step is "
            "limited more by the fixed cost of running its many small operations than by reading weights from "
            "memory. Fewer bytes per weight therefore cannot speed it up by reading less from memory; any gain "
            "below comes from the kernels."
        )
    return (
        f"{size}, more than {where}: every decode step reads most of them from memory, so decode speed "
        "follows memory bandwidth and fewer bytes per weight can make it faster."
    )


def speed_findings(comparison: PrecisionComparison, cache_bytes: int | None = None) -> list[str]:
    """Plain sentences about the measured speeds, each with a reason that holds for this model's size against
    this machine's last-level cache (`cache_bytes`, read from the machine when None)."""
    cache = machine.last_level_cache_bytes() if cache_bytes is None else cache_bytes
    results = comparison.results
    reference = results[REFERENCE]
    home = weights_home(reference.weight_bytes, cache)
    findings = [cache_sentence(reference.weight_bytes, cache)]
    findings.append(
        "Every precision runs through transformers' own forward here: float32 on torch's matrix kernels, bfloat16, "
        "int8 and int4 on torchao's. On a CPU those quantized kernels are built for large batches and GPUs; on one "
        "token at a time they can cost more than the bytes they save, so a gap below is partly the kernel, not the "
        "number format. llama.cpp's GGUF types (`python -m inference.engines llamacpp convert --type q8_0`) are "
        "built for this case."
    )
    for precision, result in results.items():
        if precision == REFERENCE:
            continue
        ratio = speed_ratio(result, reference)
        if math.isnan(ratio):
            continue
        measured = (
            f"**{precision}** decoded {result.decode_tokens_per_s:,.0f} tokens/s, "
            f"{ratio:.2f}× float32's {reference.decode_tokens_per_s:,.0f}"
        )
        if home == "memory" and weights_home(result.weight_bytes, cache) == "cache":
            fits = (
                f" Its weights ({describe_bytes(result.weight_bytes)}) fit in the "
                f"{describe_bytes(cache)} cache where float32's ({describe_bytes(reference.weight_bytes)}) do not."
            )
        else:
            fits = ""
        if ratio < 1 - SAME_SPEED_BAND:
            findings.append(f"{measured}: slower on this CPU, because {_reason(SLOWER_BECAUSE[precision], home)}{fits}")
        elif ratio > 1 + SAME_SPEED_BAND:
            findings.append(f"{measured}: faster, because {_reason(FASTER_BECAUSE[precision], home)}.{fits}")
        else:
            findings.append(
                f"{measured}: about the same (differences under {SAME_SPEED_BAND:.0%} are timing "
                f"noise on a shared CPU). Why no clear gain: {_reason(SLOWER_BECAUSE[precision], home)}{fits}"
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


GGUF_NOT_BUILT = (
    "llama-server is not built on this server, so there are no GGUF rows: "
    "`python -m inference.engines llamacpp build` (about 5 minutes) adds them."
)
GGUF_SUMMARY = (
    "GGUF files of the loaded model (the format llama.cpp reads): bytes, speed and KL beside the torch copies"
)


def intro(model_name: str) -> str:
    return (
        f"**{model_name}** with fewer bits per weight: always less memory, faster decoding only where the kernels "
        "multiply the small numbers directly, and a small change in every prediction."
    )


def cost_caption(new_tokens: int, rounds: int) -> str:
    return (
        "Bytes read from the model tensors; decode speed = 1 ÷ the median decode step's forward-pass time "
        f"(greedy, {new_tokens} new tokens), the median of {rounds} rounds after a warm-up. The precisions take "
        "turns within each round (the order rotates every round), and the speed ratio is the median of the "
        "rounds' own ratios, each precision against float32 in the same round; the range is the smallest and "
        "largest of those ratios: how much one timing can move on this shared machine."
    )


def speed_spread(summary) -> str:
    """One sentence on how far the round-by-round ratios spread, the widest first."""
    rows = summary[summary["precision"] != REFERENCE]
    if rows.empty:
        return ""
    widest = rows.loc[(rows["speed_high"] - rows["speed_low"]).idxmax()]
    return (
        f"The widest spread: **{widest['precision']}** between {widest['speed_low']:.2f}× and "
        f"{widest['speed_high']:.2f}× in single rounds (median {widest['speed_vs_float32']:.2f}×). A ratio that "
        "moves less than that between two visits is noise, not a change."
    )


def gguf_speed_gap(comparison: PrecisionComparison, gguf_results: dict) -> str:
    """`gguf_speed_explanation` for the torch float32 row and the GGUF f32 file; "" when there is nothing to say."""
    if "f32" not in gguf_results:
        return ""
    torch_rate = comparison.results[REFERENCE].decode_tokens_per_s
    server_rate = gguf_results["f32"].decode_tokens_per_s
    return gguf_speed_explanation(torch_rate, server_rate, comparison.decode_flops, comparison.leaf_modules) or ""


def gguf_speed_explanation(
    torch_tokens_per_s: float, server_tokens_per_s: float, decode_flops: int, leaf_modules: int
) -> str | None:
    """Why llama-server's f32 GGUF decodes faster than torch's float32 copy of the same weights, from what was
    measured: the same arithmetic per token in both, so the time one engine spends beyond the other is per-token
    overhead, not compute. None when either speed is missing or torch is not the slower."""
    if not (torch_tokens_per_s > 0 and server_tokens_per_s > 0) or server_tokens_per_s <= torch_tokens_per_s:
        return None
    torch_ms, server_ms = 1000 / torch_tokens_per_s, 1000 / server_tokens_per_s
    extra_ms = torch_ms - server_ms
    return (
        f"Both engines hold the same float32 weights and do the same arithmetic per token, about "
        f"{decode_flops / 1e6:,.1f} million FLOPs (counted from the model). llama-server needs {server_ms:.2f} ms "
        f"per token for it, torch {torch_ms:.2f} ms: {server_tokens_per_s / torch_tokens_per_s:.1f}× as long. The "
        f"arithmetic takes at most llama-server's {server_ms:.2f} ms, so at least {extra_ms:.2f} ms of every torch "
        f"token ({extra_ms / torch_ms:.0%}) is not compute but per-token framework overhead: eager PyTorch "
        f"dispatches each of this model's {leaf_modules} modules from Python, one small kernel call after another "
        f"(about {extra_ms * 1000 / leaf_modules:.0f} µs each on average, if it all went there), where "
        "llama-server runs one compiled graph. For a model this small that overhead dominates; on a model of "
        "billions of weights the arithmetic and the weight reads dwarf it and the two engines come closer."
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
        f"`timings` for a greedy run of the same length (median of {speed_rounds}), relative to the GGUF f32 file "
        "on the same server. KL and top-1 agreement are computed exactly from the server's whole-vocabulary "
        "distributions at every position of the same teacher-forced text as the torchao rows."
    )


SPEED_CAPTION = (
    "Decode tokens per second on this server's CPU (the median round), with the ratio to float32; the whisker "
    "runs from the slowest to the fastest round. Anything else running here (other visitors, other programs) "
    "slows these numbers: compare the ratios."
)
GREEDY_INTRO = (
    "Each precision continues the prompt with its own most likely token at every step. "
    "The first token that differs from float32's is highlighted; what follows is a different path, in italics."
)
QUALITY_INTRO = (
    "Once two greedy texts part, comparing them step by step no longer compares like with like. So every "
    "precision now reads **the same tokens** — the prompt and float32's greedy text (*teacher forcing*) — and "
    "at every step we compare its next-token distribution with float32's: the KL divergence (0 = identical), "
    "whether its top token is the same, and the probability it gives float32's token."
)
KL_CAPTION = (
    "KL(float32 ‖ precision) in nats over the full vocabulary at each step; log scale, so "
    "each gridline is 10× more drift. float32 is 0 everywhere and not drawn. ✕ = that precision's top token differs."
)
GGUF_INTRO = (
    "People who run a model on their own computer mostly download a **GGUF** file for llama.cpp (Ollama and LM "
    "Studio read it too). Here the model is converted with llama.cpp's own converter, quantized by its "
    "`llama-quantize` (q8_0: 8 bits and a scale per 32 weights; q4_K_M: mostly 4-bit blocks with 6-bit ones for "
    "the most sensitive tensors), served by a `llama-server` built on this machine, and scored against float32 on "
    "the same teacher-forced text as the rows above."
)
