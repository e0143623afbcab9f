"""What a step costs: a forward pass vs a training step on the same tokens, timed, in FLOPs (a forward ≈ 2N per
token, the backward twice that, so a step is 3 × the forward ≈ 6N) and in memory; and training's bill, once, against
inference on every request."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from inference.core import model_config
from inference.core.flops import FlopCount
from inference.core.forward import TransformersForward
from inference.core.measuring import Stopwatch, Timing
from inference.core.paths import BUNDLED_MODEL_DIR
from inference.core.quantize import weight_bytes
from inference.lessons.training_vs_inference.weights import train_step, trainable_copy
from inference.training.train import next_token_loss

REPEATS = 7  # timed passes and steps each; the median and the spread are reported
ADAM_MOMENTS = 2  # AdamW keeps two float32 numbers per parameter (exp_avg, exp_avg_sq)


def forward_flops(count: FlopCount, tokens: int) -> int:
    return 2 * (count.matmul_weights + count.output_weights) * tokens + count.attention(tokens)


@dataclass(frozen=True)
class Memory:
    weights: int
    kv_cache: int  # inference: the cache of the sentence's keys and values (float32, as the model runs here)
    gradients: int
    optimizer_moments: int
    activations: int  # bytes of the tensors autograd kept for the backward pass (measured on the real step)

    @property
    def inference(self) -> int:
        return self.weights + self.kv_cache

    @property
    def training(self) -> int:
        return self.weights + self.gradients + self.optimizer_moments + self.activations


def saved_activation_bytes(model, ids: torch.Tensor) -> int:
    """Bytes autograd saves for the backward pass (each storage once, weights left out): a step's activations."""
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def keep(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        next_token_loss(model, ids)
    return sum(storages.values())


def memory(model, trainable, ids: list[int]) -> Memory:
    params = [p for p in trainable.parameters() if p.requires_grad]
    element = next(model.parameters()).element_size()
    return Memory(
        weights=weight_bytes(model),
        kv_cache=model_config.kv_cache_bytes(
            model_config.from_config(model.config), len(ids), bytes_per_element=element
        ),
        gradients=sum(p.numel() * p.element_size() for p in params),
        optimizer_moments=ADAM_MOMENTS * sum(p.numel() for p in params) * 4,  # float32 moments
        activations=saved_activation_bytes(trainable, torch.tensor([ids])),
    )


@dataclass(frozen=True)
class StepCost:
    tokens: int
    forward: Timing
    train_step: Timing
    flops_forward: int  # whole pass over `tokens`
    flops_train: int
    parameters: int
    memory: Memory

    @property
    def flops_forward_per_token(self) -> float:
        return self.flops_forward / self.tokens

    @property
    def flops_train_per_token(self) -> float:
        return self.flops_train / self.tokens


def measure_step_cost(model, tokenizer, ids: list[int], repeats: int = REPEATS, progress=None) -> StepCost:
    """Forward passes of the shared model and training steps of a throwaway copy, interleaved (a busy moment falls on
    both), after one untimed of each."""
    batch = torch.tensor([ids])
    twin, optimizer = trainable_copy(model)
    mem = memory(model, twin, ids)
    forward_ms, train_ms = [], []
    for i in range(repeats + 1):
        with Stopwatch() as forward:
            TransformersForward(model, tokenizer).logits(ids, keep=len(ids))
        with Stopwatch() as step:
            train_step(twin, optimizer, batch)
        if i:  # the first of each is the warm-up
            forward_ms.append(forward.ms)
            train_ms.append(step.ms)
            if progress is not None:
                progress(i, repeats, "a forward pass and a training step")
    count = FlopCount.of(model)
    tokens = len(ids) - 1  # the positions a training step scores (the last token is only a target)
    return StepCost(
        tokens=tokens,
        forward=Timing(tuple(forward_ms), 1, f"a forward pass over {len(ids)} tokens, interleaved with the steps"),
        train_step=Timing(tuple(train_ms), 1, f"a training step on {len(ids)} tokens, interleaved with the passes"),
        flops_forward=forward_flops(count, tokens),
        flops_train=3 * forward_flops(count, tokens),
        parameters=sum(p.numel() for p in model.parameters()),
        memory=mem,
    )


@dataclass(frozen=True)
class TrainingBill:
    name: str
    tokens: int
    source: str
    steps: int | None = None
    seconds: float | None = None  # wall time (None where only accelerator-hours are published)
    cores: int | None = None
    accelerator_hours: float | None = None


def bundled_training_bill(folder: Path = BUNDLED_MODEL_DIR) -> TrainingBill:
    """The storyteller's own run (on 2 CPU cores, as its card says)."""
    meta = json.loads((folder / "training_meta.json").read_text())
    settings, stats = meta["settings"], meta["stats"]
    source = f"{folder.name}/training_meta.json"
    return TrainingBill(folder.name, int(stats["tokens_seen"]), source, int(settings["steps"]), stats["wall_time_s"], 2)


# Published figures only, each with its source (captions labelled Published quote `source`).
PUBLISHED = [
    TrainingBill(
        "Llama-2-7B",
        2_000_000_000_000,
        "Touvron et al. 2023, Llama 2: Open Foundation and Fine-Tuned Chat Models, §2.2 and Table 2 "
        "(2.0T tokens; 184,320 A100-80GB GPU-hours)",
        accelerator_hours=184_320,
    ),
    TrainingBill("SmolLM2-135M", 2_000_000_000_000, "HuggingFaceTB/SmolLM2-135M model card (pretraining tokens: 2T)"),
]


def requests_to_match_by_flops(training_tokens: int, request_tokens: int) -> float:
    """Requests whose inference FLOPs (2N a token) add up to training's (6N a token), whatever N is."""
    return 3 * training_tokens / request_tokens


def requests_to_match_by_time(bill: TrainingBill, request_ms: float, request_cores: int) -> float:
    return bill.seconds * bill.cores * 1000 / (request_ms * request_cores)
