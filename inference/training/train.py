"""The one training loop (`fit`) and the bundled storytellers' trainer: a byte-level BPE tokenizer, then a small
Llama (or MoE) from scratch; with `--teacher`, the model in `--out` learns the teacher's whole next-token
distribution, KL(p || q) (Hinton et al. 2015; for drafts DistillSpec, Zhou et al. 2023). `distill_real` and
`distill_features` are this loop with other losses.

    python -m inference.training.train                       # the dense model; corpus ../shared/corpus/tinystories
    python -m inference.training.train --preset draft        # the speculative-decoding draft model
    python -m inference.training.train --preset moe          # the Mixture-of-Experts model
    python -m inference.training.train --corpus DIR --steps 3000 --out assets/models/NAME
    python -m inference.training.train --preset draft --teacher assets/models/storyteller-llama-6m   # distil the draft

Draft and MoE reuse the dense model's tokenizer (a draft must share its target's vocabulary). Writes a Hugging Face
folder (config, weights, tokenizer, training log, training_meta.json); the held-out file is only ever scored.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
)

from inference.core import routing
from inference.core.measuring import now
from inference.core.model_config import decoder_config_fields
from inference.core.paths import BUNDLED_MODEL_DIR, DEFAULT_CORPUS_DIR, DEFAULT_HELDOUT_FILE, MODELS_DIR
from inference.training import corpus as corpus_io
from inference.training.evaluate import agreement, score_stream
from inference.training.moe_stats import route


@dataclass
class TrainSettings:
    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 768
    num_layers: int = 6
    num_heads: int = 8
    num_kv_heads: int = 4
    context: int = 512
    batch_size: int = 8
    steps: int = 2000
    peak_lr: float = 2e-3
    warmup_steps: int = 100
    weight_decay: float = 0.1
    validation_fraction: float = 0.02
    eval_every: int = 200
    seed: int = 1234
    bf16_autocast: bool = True
    architecture: str = "llama"  # or "mixtral": experts per layer and per token, the router's balance-loss weight
    num_experts: int = 0
    experts_per_token: int = 0
    router_aux_loss_coef: float = 0.0
    save_dtype: str = "float32"


PRESETS = {
    "dense": {},  # the bundled dense model
    "draft": dict(hidden_size=128, intermediate_size=384, num_layers=2, num_heads=4, num_kv_heads=2),  # ~1M
    # 8 experts of half the dense MLP, 2 per token: the dense model's MLP work per token, ~3x its weights;
    # bfloat16 on disk (float32 would pass a repository file's 40 MB)
    "moe": dict(
        architecture="mixtral",
        intermediate_size=384,
        num_experts=8,
        experts_per_token=2,
        router_aux_loss_coef=0.02,
        save_dtype="bfloat16",
    ),
}
PRESET_FOLDERS = {"dense": "storyteller-llama-6m", "draft": "storyteller-draft-1m", "moe": "storyteller-moe-16m"}
# With --teacher, unless a flag says otherwise: a gentler schedule from trained weights, new windows (another seed)
DISTILLATION = dict(peak_lr=1e-3, warmup_steps=50, eval_every=250, seed=4321)
GRAD_CLIP = 1.0


def build_model(s: TrainSettings):
    common = dict(
        **decoder_config_fields(s.vocab_size, s.hidden_size, s.num_layers, s.num_heads, s.num_kv_heads, s.context),
        intermediate_size=s.intermediate_size,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        initializer_range=0.02,
    )
    torch.manual_seed(s.seed)  # weight init is the only use of the global RNG, and it is seeded
    if s.architecture == "llama":
        return LlamaForCausalLM(LlamaConfig(**common))
    config = MixtralConfig(
        **common,
        head_dim=s.hidden_size // s.num_heads,
        num_local_experts=s.num_experts,
        num_experts_per_tok=s.experts_per_token,
        router_aux_loss_coef=s.router_aux_loss_coef,
        output_router_logits=False,
        sliding_window=None,
        rms_norm_eps=1e-6,
        rope_parameters={"rope_theta": 10000.0, "rope_type": "default"},  # the dense model's attention
    )
    return MixtralForCausalLM(config)


def learning_rate(step: int, steps: int, peak_lr: float, warmup_steps: int) -> float:
    """The one schedule: linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    return peak_lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def random_windows(stream: torch.Tensor, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - length - 1, (batch,), generator=gen)
    return torch.stack([stream[i : i + length + 1] for i in starts.tolist()])


def next_token_cross_entropy(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Logits of ids[:, :-1] against ids[:, 1:], in float32; -100 in `ids` is ignored."""
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats per position, p the teacher's softmax and q the student's, over the whole vocabulary."""
    log_q = F.log_softmax(student_logits.float(), dim=-1).reshape(-1, student_logits.shape[-1])
    log_p = F.log_softmax(teacher_logits.float(), dim=-1).reshape(-1, teacher_logits.shape[-1])
    return F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")


def next_token_loss(model, ids: torch.Tensor, **forward) -> tuple[torch.Tensor, object]:
    """The training loss and the model's output: `model` run on ids[:, :-1], scored against ids[:, 1:]."""
    out = model(ids[:, :-1], use_cache=False, **forward)
    return next_token_cross_entropy(out.logits, ids), out


def optimizer_step(params: list, optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
    optimizer.step()


def adamw(params, peak_lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW (β 0.9/0.95) with weight decay on the matrices only, not on norms and biases."""
    params = list(params)
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=peak_lr, betas=(0.9, 0.95))


def write_log(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(key for row in rows for key in row)))
        writer.writeheader()
        writer.writerows(rows)


def fit(model, params, loss_fn, s, steps: int, peak_lr: float, evaluate=None, log_path=None, rows=None) -> list:
    """`steps` AdamW steps on `loss_fn()` (it draws its own batch); every `s.eval_every` steps and at the end a row
    {step, loss_smoothed, **evaluate(step), elapsed_s} is printed and the log (re)written, so a stopped run keeps it."""
    optimizer = adamw(params, peak_lr, s.weight_decay)
    rows, running, started = rows or [], None, now()
    for step in tqdm(range(steps), desc="training", mininterval=10, file=sys.stdout):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps, peak_lr, s.warmup_steps)
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.bf16_autocast):
            loss = loss_fn()
        optimizer_step(params, optimizer, loss)
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        if (step + 1) % s.eval_every == 0 or step + 1 == steps:
            model.eval()
            row = {"step": step + 1, "loss_smoothed": round(running, 4), **(evaluate(step + 1) if evaluate else {})}
            rows.append({**row, "elapsed_s": round(now() - started, 1)})
            print(json.dumps(rows[-1]), flush=True)
            if log_path is not None:
                write_log(log_path, rows)
    model.eval()
    return rows


def final_scores(model, tokenizer, train_stories: list[str], val_stories: list[str], heldout_file: Path | None) -> dict:
    """Losses with overlapping windows: a training sample as large as the validation split, the validation split and
    the held-out file if any."""
    texts = {"train": train_stories[: len(val_stories)], "val": val_stories}
    streams = {k: (corpus_io.encode_stories(tokenizer, v), corpus_io.utf8_bytes(v)) for k, v in texts.items()}
    if heldout_file is not None and heldout_file.exists():
        text = heldout_file.read_text(encoding="utf-8")
        streams["heldout"] = (tokenizer(text)["input_ids"], len(text.encode("utf-8")))
    scores = {}
    for split, (ids, n_bytes) in streams.items():
        score = score_stream(model, ids, n_bytes)
        scores[f"{split}_nats_per_token"] = round(score.nats_per_token, 4)
        scores[f"{split}_bits_per_byte"] = round(score.bits_per_byte, 4)
    return scores


def run_record(module: str) -> dict:
    """How a run was made, for its training_meta.json."""
    command = " ".join(["python", "-m", f"inference.training.{module}", *sys.argv[1:]])
    return {"command": command, "torch": torch.__version__, "platform": platform.platform()}


def parse(settings_type, argv, doc: str, presets: dict | None = None, **paths):
    """The one command line: a flag per `paths` entry and per settings field (`--peak-lr`), `--preset` when there are
    presets (the preset's values, then the flags). Returns (settings, args)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in paths.items():
        parser.add_argument("--" + name.replace("_", "-"), type=Path, default=default)
    if presets:
        parser.add_argument("--preset", choices=sorted(presets), default=next(iter(presets)))
    defaults = asdict(settings_type())
    for name, value in defaults.items():
        kind = (lambda v: v.lower() in ("1", "true", "yes")) if isinstance(value, bool) else type(value)
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None)
    args = parser.parse_args(argv)
    if "corpus" in paths and args.corpus.resolve() == DEFAULT_HELDOUT_FILE.resolve().parent:
        parser.error("the held-out folder is for evaluation only: never train on it")
    values = {**defaults, **(presets[args.preset] if presets else {})}
    values.update({k: getattr(args, k) for k in defaults if getattr(args, k) is not None})
    return settings_type(**values), args


def train(
    s: TrainSettings,
    corpus_dir: Path,
    out_dir: Path,
    heldout_file: Path | None,
    tokenizer_from: Path | None = None,
    preset: str = "dense",
    teacher_dir: Path | None = None,
) -> dict:
    started = now()
    stories = corpus_io.read_stories(corpus_dir)
    earlier = json.loads((out_dir / "training_meta.json").read_text()) if teacher_dir else None
    split = earlier["settings"] if earlier else asdict(s)  # a distilled model keeps the split it was trained on
    train_stories, val_stories = corpus_io.split_train_validation(stories, split["validation_fraction"], split["seed"])
    tokenizer_from = out_dir if teacher_dir is not None else tokenizer_from
    if tokenizer_from is None:
        tokenizer = corpus_io.train_tokenizer(train_stories, s.vocab_size)
    else:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_from)
        if len(tokenizer) != split["vocab_size"]:
            raise ValueError(
                f"The tokenizer in {tokenizer_from} has {len(tokenizer)} tokens, not {split['vocab_size']}"
            )
    train_stream = torch.tensor(corpus_io.encode_stories(tokenizer, train_stories), dtype=torch.long)
    val_ids = corpus_io.encode_stories(tokenizer, val_stories)
    print(f"{len(train_stories)} train / {len(val_stories)} validation stories; {len(train_stream):,} train tokens")
    if teacher_dir is None:
        model, teacher = build_model(s), None
    else:
        model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
        teacher = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=torch.float32).eval().requires_grad_(False)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters", flush=True)
    data_rng = torch.Generator().manual_seed(s.seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    moe = s.architecture == "mixtral" and teacher is None
    load_log = []  # MoE only: the share of (token, slot) picks each expert got, per layer, at each evaluation

    def loss_fn():
        batch = random_windows(train_stream, s.batch_size, s.context, data_rng)
        if teacher is not None:
            with torch.inference_mode():
                teacher_logits = teacher(batch[:, :-1]).logits
            return distillation_loss(model(batch[:, :-1]).logits, teacher_logits.clone())
        loss, out = next_token_loss(model, batch, **({"output_router_logits": True} if moe else {}))
        return loss + s.router_aux_loss_coef * out.aux_loss.float() if moe else loss  # the router's balance loss

    def evaluate(step: int) -> dict:
        val = score_stream(model, val_ids, corpus_io.utf8_bytes(val_stories), window=s.context, stride=s.context)
        if moe:
            fractions = torch.tensor(routing.load_stats(route(model, val_ids[:8192], s.context))["fractions"])
            load_log.append({"step": step, "fractions": fractions.float().round(decimals=4).tolist()})
            (out_dir / "expert_load_log.json").write_text(json.dumps(load_log) + "\n")
        return {
            "tokens_seen": step * s.batch_size * s.context,
            "val_nats_per_token": round(val.nats_per_token, 4),
            "val_bits_per_byte": round(val.bits_per_byte, 4),
            **(agreement(teacher, model, val_ids, s.context) if teacher is not None else {}),
        }

    first = [{"step": 0, "loss_smoothed": None, **evaluate(0)}] if teacher is not None else []  # the baseline
    log = out_dir / ("distillation_log.csv" if teacher is not None else "training_log.csv")
    rows = fit(model, list(model.parameters()), loss_fn, s, s.steps, s.peak_lr, evaluate, log, first)
    tokens_seen = s.steps * s.batch_size * s.context
    stats = earlier["stats"] if earlier else {"parameters": n_params, "tokens_seen": tokens_seen}
    if not earlier:
        stats.update(train_tokens_in_corpus=len(train_stream), wall_time_s=round(now() - started, 1))
    stats.update(final_scores(model, tokenizer, train_stories, val_stories, heldout_file))
    print(json.dumps(stats), flush=True)
    if s.save_dtype != "float32":
        model = model.to(getattr(torch, s.save_dtype))  # our own copy, not a shared one
    model.save_pretrained(out_dir, safe_serialization=True)
    GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0, max_new_tokens=200).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    run = {"settings": asdict(s), **run_record("train")}
    if earlier:
        wall = round(now() - started, 1)
        distillation = {"teacher": teacher_dir.name, "tokens_seen": tokens_seen, "wall_time_s": wall}
        meta = {
            **earlier,
            "stats": stats,
            "distillation": {**run, **distillation, "before": first[0], "after": rows[-1]},
        }
    else:
        corpus_files = sorted(p.name for p in Path(corpus_dir).glob("*.txt"))
        meta = {**run, "stats": stats, "corpus": corpus_dir.name, "corpus_files": corpus_files, "preset": preset}
        meta["tokenizer_from"] = None if tokenizer_from is None else tokenizer_from.name
    (out_dir / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None):
    paths = dict(corpus=DEFAULT_CORPUS_DIR, heldout=DEFAULT_HELDOUT_FILE, out=None, tokenizer_from=None, teacher=None)
    s, args = parse(TrainSettings, argv, __doc__, PRESETS, **paths)
    if args.teacher is not None:
        s = replace(s, **{k: v for k, v in DISTILLATION.items() if getattr(args, k) is None})
    tokenizer_from = args.tokenizer_from or (None if args.preset == "dense" else BUNDLED_MODEL_DIR)
    out = args.out or MODELS_DIR / PRESET_FOLDERS[args.preset]
    train(s, args.corpus, out, args.heldout, tokenizer_from, args.preset, args.teacher)


if __name__ == "__main__":
    main()
