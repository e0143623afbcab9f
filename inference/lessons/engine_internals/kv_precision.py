"""KV-cache precision on llama-server: bytes per token from each ggml type's block layout (computed exactly, set
against the `llama_kv_cache` line the server prints), and what a quantized cache does to the next-token
distribution and to decode speed (measured).

Bytes per token = layers x kv_width x (size_K / block_K + size_V / block_V). Quality by teacher forcing over a fixed
text, the whole distribution at every position, each request one token longer so the server evaluates just the new
token against its cache: KL and top-1 agreement against f32 without flash attention (2e-5 from transformers), and
against f16 with flash attention, which a quantized V cache needs: it separates flash attention from quantization.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from inference.core.measuring import Progress
from inference.engines import llamacpp
from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.serving.replay import scaled

# ggml type -> (values per block, bytes per block): ggml-common.h's block structs (the -ctk / -ctv choices).
BLOCK_LAYOUT = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),  # f16 scale + 32 x int8
    "q5_1": (32, 24),  # f16 scale + f16 min + 32 high bits + 32 x 4 low bits
    "q5_0": (32, 22),  # f16 scale + 32 high bits + 32 x 4 low bits
    "q4_1": (32, 20),  # f16 scale + f16 min + 32 x 4 bits
    "q4_0": (32, 18),  # f16 scale + 32 x 4 bits
    "iq4_nl": (32, 18),  # f16 scale + 32 x 4-bit indices into a fixed non-linear table
}
EVALUATION_TEXT_FILE = Path(__file__).with_name("evaluation_stories.txt")
EVALUATION_TEXT_WHAT = "three short stories written for this lesson (not from the training corpus)"
# The server prints MiB with two decimals: over 16,384 cells that is 0.005 x 2^20 / 16,384 = 0.32 bytes per token
# for K and for V, under half a byte, so the printed line pins each row's bytes to one whole number.
BYTES_CHECK_CELLS = 16_384
DECODE_TOKENS = 64
DECODE_RUNS = 3


def bytes_per_value(ggml_type: str) -> float:
    if ggml_type not in BLOCK_LAYOUT:
        raise ValueError(f"`ggml_type` has to be one of {', '.join(BLOCK_LAYOUT)}, but is {ggml_type!r}")
    return BLOCK_LAYOUT[ggml_type][1] / BLOCK_LAYOUT[ggml_type][0]


def row_bytes(ggml_type: str, width: int) -> int:
    """Bytes of one row of `width` values (ggml_row_size): whole blocks only."""
    values, size = BLOCK_LAYOUT[ggml_type]
    if width % values:
        raise ValueError(f"a {ggml_type} row holds whole blocks of {values} values; {width} is not a multiple")
    return width // values * size


def kv_bytes_per_token(layers: int, kv_width: int, type_k: str, type_v: str | None = None) -> int:
    """One token's keys and values in every layer (module docstring)."""
    return layers * (row_bytes(type_k, kv_width) + row_bytes(type_v or type_k, kv_width))


@dataclass(frozen=True)
class CacheConfig:
    """One way to run the server's KV cache."""

    type_k: str
    type_v: str
    flash_attention: bool

    @property
    def label(self) -> str:
        types = self.type_k if self.type_k == self.type_v else f"K {self.type_k}, V {self.type_v}"
        return f"{types}, flash attention {'on' if self.flash_attention else 'off'}"

    def server_args(self) -> list[str]:
        # after the engines module's defaults (-ctk f32 -ctv f32 -fa off): the last value of a flag wins
        return ["-ctk", self.type_k, "-ctv", self.type_v, "-fa", "on" if self.flash_attention else "off"]


REFERENCE = CacheConfig("f32", "f32", False)
FLASH_BASELINE = CacheConfig("f16", "f16", True)
CONFIGS = (
    REFERENCE,
    CacheConfig("f16", "f16", False),
    FLASH_BASELINE,
    CacheConfig("q8_0", "q8_0", True),
    CacheConfig("q4_0", "q4_0", True),
)

_KV_LINE = re.compile(
    r"llama_kv_cache: size = +[\d.]+ MiB \( *(?P<cells>\d+) cells, +(?P<layers>\d+) layers.*?"
    r"K \((?P<k>\w+)\): +(?P<kmib>[\d.]+) MiB, V \((?P<v>\w+)\): +(?P<vmib>[\d.]+) MiB"
)


@dataclass(frozen=True)
class ReportedCache:
    """The KV cache llama-server says it allocated (its log line), per token."""

    cells: int
    layers: int
    type_k: str
    type_v: str
    k_bytes_per_token: float
    v_bytes_per_token: float

    @property
    def bytes_per_token(self) -> float:
        return self.k_bytes_per_token + self.v_bytes_per_token

    @property
    def resolution_bytes_per_token(self) -> float:
        """How far from the truth K's (or V's) bytes per token can be, the MiB being printed with two decimals."""
        return 0.005 * 2**20 / self.cells

    def agrees_with(self, layers: int, kv_width: int) -> bool:
        """K's and V's bytes per token each within the print's resolution of the block-layout formula."""
        formula = (layers * row_bytes(self.type_k, kv_width), layers * row_bytes(self.type_v, kv_width))
        reported = (self.k_bytes_per_token, self.v_bytes_per_token)
        return all(abs(r - f) <= self.resolution_bytes_per_token + 1e-9 for r, f in zip(reported, formula))


def reported_cache(log_text: str) -> ReportedCache | None:
    """The last `llama_kv_cache: size = ...` line of a server log, or None."""
    matches = list(_KV_LINE.finditer(log_text))
    if not matches:
        return None
    m, cells = matches[-1], int(matches[-1]["cells"])
    per_token = [float(m[mib]) * 2**20 / cells for mib in ("kmib", "vmib")]
    return ReportedCache(cells, int(m["layers"]), m["k"], m["v"], *per_token)


def cache_server(gguf: Path, config: CacheConfig) -> llamacpp.LlamaServer:
    """A one-slot llama-server with this KV cache and BYTES_CHECK_CELLS cells (the caller stops it); log level 4,
    the first that prints the cache it allocated."""
    args = [*config.server_args(), "-c", str(BYTES_CHECK_CELLS), "-lv", "4"]
    return llamacpp.serve(gguf, parallel=1, extra_args=args)


def measure_on(
    client: EngineClient, config: CacheConfig, ids: list[int], vocab: int, progress: Progress | None, decode_runs: int
) -> tuple[torch.Tensor, float | None]:
    """On a server started with `config`: the teacher-forced log-distributions over `ids` [positions, vocab], and
    the median decode speed of `decode_runs` greedy runs of DECODE_TOKENS tokens (None without a run)."""
    rows = []
    for position in range(1, len(ids)):
        dist = client.next_token(ids[:position], n_probs=vocab, vocab_size=vocab)
        row = torch.full((vocab,), float("-inf"), dtype=torch.float32)
        row[dist.token_ids] = dist.logprobs.float()
        rows.append(row)
        if progress is not None and position % 16 == 0:
            progress(position, len(ids), f"{config.label}: position {position} of {len(ids) - 1}")
    rates = [client.complete(ids[:8], DECODE_TOKENS).timings.decode_tokens_per_s for _ in range(decode_runs)]
    rates = [r for r in rates if r]
    return torch.stack(rows), statistics.median(rates) if rates else None


def kl_and_top1(reference: torch.Tensor, other: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position: KL(reference || other) in nats over the whole vocabulary, and whether the argmax agrees."""
    ref, oth = reference.double(), other.double()
    kl = (ref.exp() * (ref - oth)).nan_to_num(0.0).sum(-1)  # 0 x log 0 = 0 where the reference gives -inf
    return kl.clamp_min(0.0), ref.argmax(-1) == oth.argmax(-1)


@dataclass
class PrecisionComparison:
    table: pd.DataFrame  # one row per config
    positions: int
    text_what: str


def compare(
    gguf: Path,
    layers: int,
    kv_width: int,
    tokens: int = 192,
    progress: Progress | None = None,
    configs: tuple[CacheConfig, ...] = CONFIGS,
    decode_runs: int = DECODE_RUNS,
) -> PrecisionComparison:
    """Each config (REFERENCE first, then FLASH_BASELINE among them) on a fresh server (see module docstring)."""
    if configs[0] != REFERENCE or FLASH_BASELINE not in configs:
        raise ValueError("`configs` start with the f32 reference and include the f16 flash-attention baseline")
    measured, ids, vocab = {}, None, None
    for i, config in enumerate(configs):
        # the cache it allocated, from its own start: BYTES_CHECK_CELLS cells make every pass slower (about 3x
        # measured with flash attention), so the distributions and speeds come from a server of the usual size
        with cache_server(gguf, config) as sized:
            reported = reported_cache(sized.log_path.read_text(errors="replace"))
        with (
            llamacpp.serve(gguf, parallel=1, extra_args=config.server_args()) as server,
            EngineClient(server.url, dialect=LLAMACPP, timeout=600) as client,
        ):
            if ids is None:  # the server's own tokens for the text, BOS first
                ids = client.tokenize(EVALUATION_TEXT_FILE.read_text(), add_special=True)[: tokens + 1]
                vocab = client.served_model().vocab_size
            inner = scaled(progress, i * len(ids), len(ids), len(configs) * len(ids))
            measured[config] = (reported, *measure_on(client, config, ids, vocab, inner, decode_runs))
    reference, flash = measured[REFERENCE][1], measured[FLASH_BASELINE][1]
    rows = []
    for config, (reported, logprobs, decode) in measured.items():
        (kl, top1), (kl_flash, _) = kl_and_top1(reference, logprobs), kl_and_top1(flash, logprobs)
        rows.append(
            {
                "cache": config.label,
                "type_k": config.type_k,
                "type_v": config.type_v,
                "flash_attention": config.flash_attention,
                "bytes_per_token": kv_bytes_per_token(layers, kv_width, config.type_k, config.type_v),
                "reported_bytes_per_token": None if reported is None else reported.bytes_per_token,
                "mean_kl_vs_f32": float(kl.mean()),
                "top1_agreement_vs_f32": float(top1.double().mean()),
                "mean_kl_vs_f16_flash": float(kl_flash.mean()),
                "decode_tokens_per_s": decode,
            }
        )
    return PrecisionComparison(pd.DataFrame(rows), len(ids) - 1, EVALUATION_TEXT_WHAT)


def mib(value: float) -> float:
    return value / 2**20
