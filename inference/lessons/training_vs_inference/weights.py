"""Weights move only when training: a fingerprint of every tensor, inference run many times (it changes nothing),
then training steps with the project's own optimizer and loss on a per-session copy (it changes them).

The shared model (st.cache_resource) is only ever read here: `TrainingCopy.of` deep-copies it, and only the copy
gets gradients, an optimizer and steps. The loss is the one `inference/training/train.py` minimises (next-token
cross entropy on float32 logits, gradients clipped to norm 1), with its optimizer (`adamw`: AdamW, β 0.9/0.95,
weight decay on matrices only) at its peak learning rate.
"""

from __future__ import annotations

import copy
import hashlib
import time
from dataclasses import dataclass, field

import torch

from inference.core.tokens import readable_token
from inference.training.train import TrainSettings, adamw, next_token_cross_entropy, optimizer_step

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


def tensor_digests(model: torch.nn.Module) -> dict[str, str]:
    """SHA-256 of each tensor's dtype, shape and bytes: two digests are equal only if every bit is."""
    digests = {}
    for name, tensor in named_tensors(model):
        data = tensor.detach().contiguous().cpu()
        digest = hashlib.sha256(f"{data.dtype}|{tuple(data.shape)}|".encode())
        digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        digests[name] = digest.hexdigest()
    return digests


def fingerprint(model: torch.nn.Module, digests: dict[str, str] | None = None) -> str:
    """One SHA-256 over every tensor's name and digest: the weights' fingerprint."""
    digests = tensor_digests(model) if digests is None else digests
    return hashlib.sha256("".join(f"{n}={d};" for n, d in digests.items()).encode()).hexdigest()


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every parameter (to compare with after training)."""
    return {name: p.detach().clone() for name, p in named_tensors(model) if isinstance(p, torch.nn.Parameter)}


@dataclass(frozen=True)
class Distribution:
    """The next-token distribution after `context_ids` (the sentence without its last token)."""

    probs: torch.Tensor  # [vocab], float32
    target_id: int  # the sentence's last token: what training on the sentence teaches at this position
    top_ids: list[int]
    top_labels: list[str]

    @property
    def target_probability(self) -> float:
        return float(self.probs[self.target_id])

    def top(self, tokenizer, k: int = TOP_K) -> list[dict]:
        return [
            {"token": readable_token(tokenizer, int(i)), "id": int(i), "probability": round(float(self.probs[i]), 6)}
            for i in self.top_ids[:k]
        ]


def check_sentence(ids: list[int]) -> None:
    if len(ids) < 2:
        raise ValueError("The sentence needs at least two tokens: the model predicts the last one from the others.")


@torch.inference_mode()
def next_token_distribution(model, tokenizer, ids: list[int], k: int = 10) -> Distribution:
    """The model's probabilities for the token after `ids[:-1]` (the position where the sentence's last token goes)."""
    check_sentence(ids)
    logits = model(torch.tensor([ids[:-1]]), use_cache=False, logits_to_keep=1).logits[0, -1].float()
    probs = torch.softmax(logits, dim=-1)
    top_ids = probs.topk(k).indices.tolist()
    return Distribution(probs, ids[-1], top_ids, [readable_token(tokenizer, i) for i in top_ids])


@dataclass(frozen=True)
class InferenceCheck:
    passes: int
    fingerprint_before: str
    fingerprint_after: str
    tensors: int
    tensors_bit_equal: int

    @property
    def changed(self) -> bool:
        return self.fingerprint_before != self.fingerprint_after


@torch.inference_mode()
def _forward_passes(model, ids: list[int], passes: int) -> None:
    batch = torch.tensor([ids])
    for _ in range(passes):
        model(batch, use_cache=False)


def run_inference_many(model, ids: list[int], passes: int = INFERENCE_PASSES) -> InferenceCheck:
    """`passes` forward passes over the sentence; every tensor's digest and the fingerprint compared before and
    after (digests, not copies: a copy of a 135M model would be 540 MB)."""
    before = tensor_digests(model)
    _forward_passes(model, ids, passes)
    after = tensor_digests(model)
    equal = sum(before[name] == after.get(name) for name in before)
    return InferenceCheck(passes, fingerprint(model, before), fingerprint(model, after), len(before), equal)


def next_token_loss(model, ids: torch.Tensor) -> torch.Tensor:
    """train.py's loss: cross entropy of every position's float32 logits against the next token. `ids` [batch, T]."""
    return next_token_cross_entropy(model(ids[:, :-1], use_cache=False).logits, ids)


def train_step(model, optimizer, ids: torch.Tensor) -> float:
    """One step as train.py takes it: loss, backward, clip to norm 1, AdamW step. Returns the loss before the step."""
    model.train()
    loss = next_token_loss(model, ids)
    optimizer_step(model, optimizer, loss)
    model.eval()
    return loss.item()


def trainable_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of a (shared, read-only) model with gradients on: the only model training ever touches."""
    twin = copy.deepcopy(model)
    twin.requires_grad_(True)
    twin.eval()
    return twin


@dataclass
class TrainingCopy:
    """One visitor's copy of the model, its optimizer and the weights it started from (Reset goes back to them)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    start: dict[str, torch.Tensor]
    losses: list[float] = field(default_factory=list)  # the loss on the sentence before each step taken
    step_ms: list[float] = field(default_factory=list)  # each step's time (loss, backward, clip, AdamW)

    @classmethod
    def of(cls, model: torch.nn.Module, lr: float = LEARNING_RATE) -> TrainingCopy:
        twin = trainable_copy(model)
        return cls(twin, adamw(twin, lr, WEIGHT_DECAY), snapshot(twin))

    def train(self, ids: list[int], steps: int) -> list[float]:
        """`steps` training steps on the sentence; the loss before each, and after the last, are kept in `losses`."""
        check_sentence(ids)
        batch = torch.tensor([ids])
        if not self.losses:
            self.losses.append(self.loss(ids))
        for _ in range(steps):
            start = time.perf_counter()
            train_step(self.model, self.optimizer, batch)
            self.step_ms.append((time.perf_counter() - start) * 1000)
            self.losses.append(self.loss(ids))
        self.optimizer.zero_grad(set_to_none=True)  # a kept copy holds no gradients between clicks
        return self.losses

    @torch.no_grad()
    def loss(self, ids: list[int]) -> float:
        return next_token_loss(self.model, torch.tensor([ids])).item()

    @property
    def steps(self) -> int:
        return max(0, len(self.losses) - 1)

    @torch.no_grad()
    def reset(self) -> None:
        """Every weight back to the start, the optimizer's moments and the losses dropped."""
        params = dict(named_tensors(self.model))
        for name, value in self.start.items():
            params[name].copy_(value)
        self.optimizer = adamw(self.model, self.optimizer.defaults["lr"], WEIGHT_DECAY)
        self.losses, self.step_ms = [], []


@dataclass(frozen=True)
class TensorChange:
    name: str
    parameters: int
    relative_change: float  # ‖after − before‖ / ‖before‖
    bytes_changed: int  # bytes of the elements whose bits differ
    bytes_total: int


def weight_changes(start: dict[str, torch.Tensor], model: torch.nn.Module) -> list[TensorChange]:
    """How far each tensor moved from `start`, and how many of its bytes differ bit for bit."""
    now = dict(named_tensors(model))
    changes = []
    for name, before in start.items():
        after = now[name].detach()
        differ = int((before.view(-1) != after.reshape(-1)).sum())
        norm = float(before.float().norm())
        moved = float((after.float() - before.float()).norm())
        size = before.element_size()
        changes.append(
            TensorChange(name, before.numel(), moved / norm if norm else moved, differ * size, before.numel() * size)
        )
    return changes


def layer_of(name: str) -> str:
    """A tensor's layer for the chart: "layer 3" for model.layers.3.*, else the part's name (embedding, norm)."""
    parts = name.split(".")
    if "layers" in parts:
        return f"layer {parts[parts.index('layers') + 1]}"
    if "embed" in name:
        return "embedding"
    if "lm_head" in name:
        return "output layer"
    return "final norm" if "norm" in name else parts[-2] if len(parts) > 1 else name


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
    rise = after.probs - before.probs
    top = rise.topk(k)
    return [(readable_token(tokenizer, int(i)), float(r)) for r, i in zip(top.values, top.indices) if r >= 1e-4]


@dataclass(frozen=True)
class TrainingResult:
    """What training did, kept without the copy (so a large model's copy can be dropped)."""

    after: Distribution
    losses: list[float]
    changes: list[TensorChange]
    fingerprint_after: str
    step_ms: list[float]  # every step's time, in order


def train_and_compare(copy_: TrainingCopy, tokenizer, ids: list[int], steps: int) -> TrainingResult:
    """`steps` more training steps of the copy on the sentence, then its distribution, moves and fingerprint."""
    losses = list(copy_.train(ids, steps))
    after = next_token_distribution(copy_.model, tokenizer, ids)
    changes = weight_changes(copy_.start, copy_.model)
    return TrainingResult(after, losses, changes, fingerprint(copy_.model), list(copy_.step_ms))
