"""Weights move only when training: inference leaves their fingerprint as it was; training steps (the project's own
loop parts, `inference.training.train`) on a per-session copy move them. The shared model is only ever read."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field

import torch

from inference.core.forward import TransformersForward
from inference.core.measuring import Stopwatch
from inference.core.tokens import readable_token
from inference.training.train import TrainSettings, adamw, next_token_loss, optimizer_step

LEARNING_RATE = TrainSettings().peak_lr  # the bundled model's own peak learning rate
WEIGHT_DECAY = TrainSettings().weight_decay
INFERENCE_PASSES = 20  # forward passes the "inference changes nothing" check runs
TOP_K = 5


def named_tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """Every tensor the model holds (parameters and buffers), each once (a tied output layer is the embedding)."""
    seen, tensors = set(), []
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            tensors.append((name, tensor))
    return tensors


def fingerprint(model: torch.nn.Module) -> str:
    """SHA-256 over every tensor's name, dtype, shape and bytes: two fingerprints are equal only if every bit is."""
    digest = hashlib.sha256()
    for name, tensor in named_tensors(model):
        data = tensor.detach().contiguous().cpu()
        digest.update(f"{name}|{data.dtype}|{tuple(data.shape)}|".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
    return digest.hexdigest()


def check_sentence(ids: list[int]) -> None:
    if len(ids) < 2:
        raise ValueError("The sentence needs at least two tokens: the model predicts the last one from the others.")


@dataclass(frozen=True)
class Distribution:
    probs: torch.Tensor  # [vocab], float32
    target_id: int
    top_ids: list[int]

    @property
    def target_probability(self) -> float:
        return float(self.probs[self.target_id])

    def top(self, tokenizer, k: int = TOP_K) -> list[dict]:
        return [
            {"token": readable_token(tokenizer, int(i)), "id": int(i), "probability": round(float(self.probs[i]), 6)}
            for i in self.top_ids[:k]
        ]


def next_token_distribution(model, tokenizer, ids: list[int], k: int = 10) -> Distribution:
    """The model's probabilities for the token after `ids[:-1]` (where the sentence's last token goes)."""
    check_sentence(ids)
    probs = torch.softmax(TransformersForward(model, tokenizer).logits(ids[:-1])[-1], dim=-1)
    return Distribution(probs, ids[-1], probs.topk(k).indices.tolist())


@dataclass(frozen=True)
class InferenceCheck:
    passes: int
    fingerprint_before: str
    fingerprint_after: str
    tensors: int

    @property
    def changed(self) -> bool:
        return self.fingerprint_before != self.fingerprint_after


def run_inference_many(model, tokenizer, ids: list[int], passes: int = INFERENCE_PASSES) -> InferenceCheck:
    """`passes` forward passes, the weights' fingerprint before and after (not a copy: 540 MB for a 135M model)."""
    before = fingerprint(model)
    for _ in range(passes):
        TransformersForward(model, tokenizer).logits(ids, keep=len(ids))
    return InferenceCheck(passes, before, fingerprint(model), len(named_tensors(model)))


def train_step(model, optimizer, ids: torch.Tensor) -> None:
    """One step as every trainer takes it: loss, backward, clip, AdamW step."""
    model.train()
    loss, _ = next_token_loss(model, ids)
    optimizer_step(list(model.parameters()), optimizer, loss)
    model.eval()


def trainable_copy(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """A deep copy of the (shared, read-only) model with gradients on, and its optimizer."""
    twin = copy.deepcopy(model).requires_grad_(True).eval()
    return twin, adamw(twin.parameters(), LEARNING_RATE, WEIGHT_DECAY)


@dataclass
class TrainingCopy:
    """One visitor's copy of the model, its optimizer and the weights it started from (Reset goes back to them)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    start: dict[str, torch.Tensor]
    losses: list[float] = field(default_factory=list)  # the loss on the sentence before each step, and after the last
    step_ms: list[float] = field(default_factory=list)  # each step's time (loss, backward, clip, AdamW)

    @classmethod
    def of(cls, model: torch.nn.Module) -> TrainingCopy:
        twin, optimizer = trainable_copy(model)
        start = {name: p.detach().clone() for name, p in twin.named_parameters()}
        return cls(twin, optimizer, start)

    def train(self, ids: list[int], steps: int) -> list[float]:
        check_sentence(ids)
        batch = torch.tensor([ids])
        if not self.losses:
            self.losses.append(self.loss(batch))
        for _ in range(steps):
            with Stopwatch() as watch:
                train_step(self.model, self.optimizer, batch)
            self.step_ms.append(watch.ms)
            self.losses.append(self.loss(batch))
        self.optimizer.zero_grad(set_to_none=True)  # a kept copy holds no gradients between clicks
        return self.losses

    @torch.no_grad()
    def loss(self, batch: torch.Tensor) -> float:
        return next_token_loss(self.model, batch)[0].item()

    @property
    def steps(self) -> int:
        return max(0, len(self.losses) - 1)

    @torch.no_grad()
    def reset(self) -> None:
        """Every weight back to the start, the optimizer's moments and the losses dropped."""
        params = dict(self.model.named_parameters())
        for name, value in self.start.items():
            params[name].copy_(value)
        self.optimizer = adamw(self.model.parameters(), LEARNING_RATE, WEIGHT_DECAY)
        self.losses, self.step_ms = [], []


@dataclass(frozen=True)
class TensorChange:
    name: str
    relative_change: float  # ‖after − before‖ / ‖before‖
    bytes_changed: int  # bytes of the elements whose bits differ
    bytes_total: int


def weight_changes(start: dict[str, torch.Tensor], model: torch.nn.Module) -> list[TensorChange]:
    """How far each tensor moved from `start`, and how many of its bytes differ bit for bit."""
    changes, now = [], dict(model.named_parameters())
    for name, before in start.items():
        after, size = now[name].detach(), before.element_size()
        differ = int((before.view(-1) != after.reshape(-1)).sum())
        norm, moved = float(before.float().norm()), float((after.float() - before.float()).norm())
        changes.append(TensorChange(name, moved / norm if norm else moved, differ * size, before.numel() * size))
    return changes


def chart_rows(tokenizer, before: Distribution, after: Distribution | None, k: int = 4) -> list:
    """(label, p before, p after or None) for the top `k` tokens before, the top `k` after, and the sentence's last
    token, most likely first (after training when there is an after)."""
    ids = list(dict.fromkeys([*before.top_ids[:k], *(after.top_ids[:k] if after else []), before.target_id]))
    ranked = sorted(ids, key=lambda i: -float((after or before).probs[i]))
    return [
        (readable_token(tokenizer, i), float(before.probs[i]), None if after is None else float(after.probs[i]))
        for i in ranked
    ]


def gains(tokenizer, before: Distribution, after: Distribution, k: int = 3) -> list[tuple[str, float]]:
    """The `k` tokens whose probability rose most, with the rise."""
    top = (after.probs - before.probs).topk(k)
    return [(readable_token(tokenizer, int(i)), float(r)) for r, i in zip(top.values, top.indices) if r >= 1e-4]


@dataclass(frozen=True)
class TrainingResult:
    """What training did, kept without the copy (a large model's copy is dropped)."""

    after: Distribution
    losses: list[float]
    changes: list[TensorChange]
    fingerprint_after: str
    step_ms: list[float]

    @property
    def bytes_changed(self) -> int:
        return sum(c.bytes_changed for c in self.changes)

    @property
    def bytes_total(self) -> int:
        return sum(c.bytes_total for c in self.changes)


def train_and_compare(copy_: TrainingCopy, tokenizer, ids: list[int], steps: int) -> TrainingResult:
    """`steps` more training steps of the copy on the sentence, then its distribution, moves and fingerprint."""
    losses = list(copy_.train(ids, steps))
    after = next_token_distribution(copy_.model, tokenizer, ids)
    changes = weight_changes(copy_.start, copy_.model)
    return TrainingResult(after, losses, changes, fingerprint(copy_.model), list(copy_.step_ms))
