"""GGUF types on llama-server, the page's one GGUF path: SmolLM2's files (its wheel's Q4_1, dequantized to f32, and
q8_0 / q4_K_M quantized from that f32 by `llama-quantize`) or the loaded model converted by llama.cpp. Each type on a
server of its own: the file's bytes, decode tokens/s from the server's own timings, and at `positions` of f32's
greedy answer the KL of the server's TOP_K next tokens (the rest one "other" outcome: a lower bound of the full KL)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from gguf import GGUFReader
from transformers import AutoTokenizer

from inference.core import real_model
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient, EngineError  # noqa: F401  (EngineError: for the page)

REAL = real_model.REAL_MODEL_NAME  # the `source` of SmolLM2's files; None is the bundled model, else a folder
REAL_TYPES = ("f32", "q8_0", "q4_K_M", "Q4_1")  # f32 first: the baseline every other row is compared with
LOADED_TYPES = ("f32", "q8_0", "q4_K_M")  # the loaded model's: what llamacpp.convert makes
SHIPPED = "Q4_1"  # the wheel's own file
TOP_K = 1000  # next tokens asked for at each position (the whole vocabulary costs ~10x more)
POSITIONS = 24  # positions of f32's answer compared
DECODE_TOKENS = 64  # tokens decoded per timing round
ROUNDS = 2  # timing rounds per type (the median is shown)
VOCAB = 49_152  # SmolLM2's tokenizer
CLIENT_TIMEOUT_S = 120.0  # a busy machine can take long over one timing round
QUESTION = "Why is the sky blue? Answer in two sentences."
BUSY_SPREAD = 0.25  # rounds of one type further apart than this: the machine was doing other work meanwhile
BYTES_SLACK = 1.25  # a speed-up this much beyond the bytes saved cannot come from the bytes: a busy f32 round


def unavailable_reason() -> str | None:
    """Why SmolLM2's GGUF rows cannot be measured here, or None when they can."""
    if not llamacpp.is_built():
        return "llama-server is not built here: `python -m inference.engines llamacpp build` (about 5 minutes)."
    if not real_model.is_available():
        return f"{REAL} is not installed here: `{real_model.INSTALL_HINT}` (93 MB)."
    return None


def bytes_read_per_token(path: Path) -> int:
    """A GGUF's tensor bytes one decode pass reads: every tensor once, less the embedding table when an untied
    `output.weight` exists (then the table is only looked up, a row a token). The header is not read."""
    tensors = {t.name: int(t.n_bytes) for t in GGUFReader(path).tensors}
    return sum(tensors.values()) - (tensors.get("token_embd.weight", 0) if "output.weight" in tensors else 0)


def chat_prompt_ids(question: str = QUESTION) -> list[int]:
    """The question in SmolLM2's chat template (its default system prompt included)."""
    tokenizer = AutoTokenizer.from_pretrained(real_model.real_model_folder())
    messages = [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def coarse_kl(p: dict[int, float], q: dict[int, float]) -> float:
    """KL(p ‖ q) in nats over the tokens both top lists hold, plus one "other" outcome for the rest on each side."""
    shared = p.keys() & q.keys()
    kl = sum(p[t] * math.log(p[t] / q[t]) for t in shared if p[t] > 0)
    p_other = max(0.0, 1.0 - sum(p[t] for t in shared))
    q_other = max(1e-300, 1.0 - sum(q[t] for t in shared))
    return max(0.0, kl + (p_other * math.log(p_other / q_other) if p_other > 0 else 0.0))


@dataclass
class TypeResult:
    gguf_type: str
    file_bytes: int
    decode_rates: list[float]  # one per round, from the server's timings
    top: list[dict[int, float]]  # per position: token id -> probability, the server's TOP_K
    answer_ids: list[int] = field(default_factory=list)  # its own greedy answer
    answer_text: str = ""
    read_bytes: int = 0  # `bytes_read_per_token`

    @property
    def bytes_per_token(self) -> int:
        return self.read_bytes or self.file_bytes

    @property
    def decode_tokens_per_s(self) -> float:
        return statistics.median(self.decode_rates) if self.decode_rates else math.nan


@dataclass
class GGUFResult:
    question: str  # what the prompt says (the loaded model's: the page's prompt)
    prompt_tokens: int
    reference_ids: list[int]  # f32's greedy answer, whose prefixes every type is scored on
    reference_text: str
    results: dict[str, TypeResult]
    positions: int
    decode_tokens: int
    rounds: int


def measure_type(gguf_type, prompt_ids, reference_ids, positions, decode_tokens, rounds, threads, source, vocab):
    """One GGUF type on its own llama-server: timing rounds, then the top lists at the prefixes of `reference_ids`
    (its own answer when None: the f32 baseline). `positions` 0: timing only (the bench)."""
    converted = (gguf_type, source) != (SHIPPED, REAL)
    path = llamacpp.convert(source, gguf_type) if converted else real_model.checked_gguf()
    with (
        llamacpp.serve(path, threads=threads) as server,
        EngineClient(server.url, dialect=LLAMACPP, timeout=CLIENT_TIMEOUT_S) as client,
    ):
        client.complete(prompt_ids, 4)  # warm-up: a new server's first pass sets up its buffers
        rates = [
            client.complete(prompt_ids, decode_tokens, ignore_eos=True, cache_prompt=False).timings
            for _ in range(rounds)
        ]
        rates = [t.decode_tokens_per_s for t in rates if t.decode_tokens_per_s is not None]
        if positions == 0:
            return TypeResult(gguf_type, path.stat().st_size, rates, [], read_bytes=bytes_read_per_token(path))
        answer = client.complete(prompt_ids, positions, ignore_eos=False)  # stops at end-of-turn, as a chat
        reference = list(answer.token_ids if reference_ids is None else reference_ids)[:positions]
        top = []
        for i in range(len(reference)):
            dist = client.next_token(prompt_ids + reference[:i], TOP_K, vocab)
            top.append({int(t): math.exp(float(lp)) for t, lp in zip(dist.token_ids.tolist(), dist.logprobs.tolist())})
    size, read = path.stat().st_size, bytes_read_per_token(path)
    return TypeResult(gguf_type, size, rates, top, list(answer.token_ids), answer.text, read)


def measure(
    prompt_ids=None,
    types=REAL_TYPES,
    source: str | None = REAL,
    question: str = QUESTION,
    positions: int = POSITIONS,
    decode_tokens: int = DECODE_TOKENS,
    rounds: int = ROUNDS,
    progress=None,
    threads: int | None = None,
    vocab: int = VOCAB,
) -> GGUFResult:
    """Every type in `types` of `source`, f32 first (the baseline). Without `prompt_ids`, `question` in SmolLM2's
    chat template."""
    types = ["f32"] + [t for t in types if t != "f32"]
    prompt_ids = chat_prompt_ids(question) if prompt_ids is None else list(prompt_ids)
    results: dict[str, TypeResult] = {}
    for done, gguf_type in enumerate(types):
        if progress:
            progress(done, len(types), f"GGUF {gguf_type}: converting (once), serving, timing, scoring")
        reference = results["f32"].answer_ids if results else None
        args = (prompt_ids, reference, positions, decode_tokens, rounds, threads, source, vocab)
        results[gguf_type] = measure_type(gguf_type, *args)
    base = results["f32"]
    return GGUFResult(
        question, len(prompt_ids), base.answer_ids, base.answer_text, results, len(base.top), decode_tokens, rounds
    )


def round_spread(rates: list[float]) -> float:
    """How far apart one type's timing rounds are: fastest ÷ slowest − 1 (0 for one round, nan for none)."""
    rates = [r for r in rates if r and math.isfinite(r)]
    return max(rates) / min(rates) - 1 if rates else math.nan


def table(result: GGUFResult) -> pd.DataFrame:
    """One row per type: bytes and decode tokens/s, both against f32, the rounds' spread, the mean coarse KL from
    f32 and the share of positions with f32's top-1 token."""
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


COLUMNS = {  # the table's columns: dataframe format and hover help
    "file bytes": ("localized", None),
    "size vs f32": ("%.2f×", None),
    "decode tokens/s": ("%.0f", "Median of the rounds, from the server's own timings"),
    "speed vs f32": ("%.2f×", None),
    "spread over rounds": ("percent", "Fastest round ÷ slowest − 1: large when other work shared the CPU"),
    "mean KL from f32 (nats)": ("%.1e", None),
    "same top-1 as f32": ("percent", None),
}
