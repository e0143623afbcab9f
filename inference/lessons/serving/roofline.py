"""The roofline of this machine, and where prefill and batched decode sit on it.

A pass takes at least max(bytes / bandwidth, FLOPs / peak); its intensity FLOPs / bytes says which binds (below the
ridge peak / bandwidth: memory). Decode at batch B reads every weight once and does 2 FLOPs per weight per sequence,
so intensity ~ B / 2 in float32: predicted tokens/s grow with B until the ridge; a P-token prefill sits near P / 2.
Counts come from the weight file's shapes (exact), bandwidth and peak from `inference.core.machine` (measured). Left
out: each pass's fixed cost, weights that fit the last-level cache, kernels that reach neither roof.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

from inference.core import machine
from inference.core.paths import PROJECT_ROOT

LAYER_INDEX = re.compile(r"\.layers\.(\d+)\.")


@dataclass(frozen=True)
class ServedModel:
    """What the arithmetic of one pass needs, read from the weights: see `from_safetensors`."""

    matmul_parameters: int  # weights multiplied for every token, the output layer included
    other_parameters: int  # norms (read every pass, no matmul) and, when untied, the embedding table (one row read)
    layers: int
    query_width: int  # heads x head_dim
    kv_width: int  # kv_heads x head_dim
    bytes_per_weight: float = 4.0  # float32 GGUF
    bytes_per_cache_value: float = 4.0  # llama-server with -ctk f32 -ctv f32

    @classmethod
    def from_shapes(cls, shapes: dict[str, tuple[int, ...]]) -> ServedModel:
        """Counts from a transformers Llama checkpoint's tensor shapes. Tied (no `lm_head`), the embedding table is
        also the output layer, multiplied for every token; untied, it is a lookup of one row per token."""
        numel = {name: math.prod(shape) for name, shape in shapes.items()}
        tied = not any(name.endswith("lm_head.weight") for name in shapes)
        matmul = sum(n for name, n in numel.items() if len(shapes[name]) == 2 and (tied or "embed_tokens" not in name))
        q, k = (
            next(s[0] for n, s in shapes.items() if n.endswith(f"layers.0.self_attn.{x}_proj.weight")) for x in "qk"
        )
        layers = 1 + max(int(m.group(1)) for name in shapes if (m := LAYER_INDEX.search(name)))
        return cls(matmul, sum(numel.values()) - matmul, layers, q, k)

    @classmethod
    def from_safetensors(cls, path: str | Path) -> ServedModel:
        """From the weight file's shapes; no tensor is loaded."""
        with safe_open(str(path), framework="pt") as f:
            return cls.from_shapes({name: tuple(f.get_slice(name).get_shape()) for name in f.keys()})  # noqa: SIM118

    @property
    def weight_bytes_per_pass(self) -> float:
        """Every multiplied weight is read once per pass, whatever the batch (norms are too small to count)."""
        return self.matmul_parameters * self.bytes_per_weight

    def kv_bytes_per_token(self) -> float:
        return 2 * self.layers * self.kv_width * self.bytes_per_cache_value  # a key and a value per layer


@dataclass(frozen=True)
class PassCost:
    name: str
    tokens: int  # tokens the pass produces or reads
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes


def decode_pass(model: ServedModel, batch: int, context: int) -> PassCost:
    """One decode pass of `batch` sequences, each with `context` tokens already cached: weights read once,
    every sequence's cache read, 2 FLOPs per weight per sequence, attention 4 x layers x query width x context
    per sequence (scores q.k and the weighted sum of values, a multiply and an add each)."""
    flops = batch * (2 * model.matmul_parameters + 4 * model.layers * model.query_width * context)
    moved = model.weight_bytes_per_pass + batch * context * model.kv_bytes_per_token()
    return PassCost(f"decode, batch {batch}", batch, flops, moved)


def prefill_pass(model: ServedModel, prompt_tokens: int) -> PassCost:
    """One prefill pass over `prompt_tokens` tokens: weights read once, 2 FLOPs per weight per token, causal
    attention over the 1 + 2 + ... + P earlier positions, the cache written once."""
    p = prompt_tokens
    flops = 2 * model.matmul_parameters * p + 4 * model.layers * model.query_width * p * (p + 1) / 2
    moved = model.weight_bytes_per_pass + p * model.kv_bytes_per_token()
    return PassCost(f"prefill, {p} tokens", p, flops, moved)


@dataclass(frozen=True)
class Roof:
    bandwidth_bytes_per_s: float
    peak_flops: float

    @property
    def ridge_intensity(self) -> float:
        """Where the sloped roof meets the flat one: below it a pass is bound by memory."""
        return self.peak_flops / self.bandwidth_bytes_per_s

    def attainable_flops(self, intensity: float) -> float:
        return min(self.peak_flops, self.bandwidth_bytes_per_s * intensity)

    def pass_seconds(self, cost: PassCost) -> float:
        return max(cost.bytes / self.bandwidth_bytes_per_s, cost.flops / self.peak_flops)

    def bound(self, cost: PassCost) -> str:
        return "memory" if cost.intensity < self.ridge_intensity else "compute"

    def tokens_per_s(self, cost: PassCost) -> float:
        """The most tokens per second this pass can make or read, by the roofline."""
        return cost.tokens / self.pass_seconds(cost)


@dataclass(frozen=True)
class MachineRoof:
    roof: Roof
    threads: int
    how: str  # how the two numbers were measured
    last_level_cache_bytes: int | None


_MEASURE_SCRIPT = """
import json, torch
torch.set_num_threads({threads})
from inference.core import machine
flops, bandwidth = machine.peak_flops(torch.float32), machine.memory_bandwidth()
print(json.dumps({{"flops": flops.value, "flops_how": flops.how, "bandwidth": bandwidth.value,
                  "bandwidth_how": bandwidth.how, "llc": machine.last_level_cache_bytes()}}))
"""


def measure_machine_roof(threads: int | None = None) -> MachineRoof:
    """Peak float32 FLOP/s and memory bandwidth from `inference.core.machine`, measured in a separate Python process on
    `threads` threads (default: every CPU, as llama-server uses): the app itself runs torch on fewer threads, and
    changing that process-wide setting would slow every other visitor."""
    threads = threads or machine.logical_cpus()
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE_SCRIPT.format(threads=threads)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    values = json.loads(out.strip().splitlines()[-1])
    how = f"peak: {values['flops_how']}; bandwidth: {values['bandwidth_how']}"
    return MachineRoof(Roof(values["bandwidth"], values["flops"]), threads, how, values["llc"])
