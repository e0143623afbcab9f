"""Distil the draft from its target: teach the small model the big one's whole next-token distribution.

    python -m inference.training.distill                      # the bundled draft, from its own weights
    python -m inference.training.distill --steps 400 --out /tmp/draft-distilled

Why: speculative decoding keeps a drafted token with probability min(1, p/q), so its acceptance rate is
sum_x min(p(x), q(x)), one minus the distance between the target's distribution p and the draft's q. A
draft trained only on the text's next tokens learns the text's distribution; a draft trained to match p
(knowledge distillation, Hinton et al. 2015; for drafts, DistillSpec, Zhou et al. 2023) moves q towards
the one distribution acceptance is measured against.

The loss is the forward KL divergence KL(p || q) over the whole vocabulary at every position of windows of
the training split (the same stories and split as `train.py`, the validation stories never seen), starting
from the draft's own weights. The teacher runs in inference mode and is never changed. Every evaluation
reports, on the validation stories, the draft's loss and how often it agrees with the target: the share of
positions where both pick the same top token (greedy acceptance) and the mean of sum_x min(p, q) at
temperatures 1 and 0.8 (sampled acceptance). These are computed on stored text, not on generated text, so
they are close to, not equal to, what the Speculative page measures.

Writes the same folder `train.py` writes (weights, tokenizer, training_meta.json with a "distillation"
entry, training_log.csv); `python -m inference.training.model_card FOLDER` then writes its card.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer

from inference.core.paths import BUNDLED_MODEL_DIR, DEFAULT_CORPUS_DIR, DEFAULT_HELDOUT_FILE, MODELS_DIR
from inference.training import corpus as corpus_io
from inference.training.evaluate import score_stream
from inference.training.train import adamw, encode_stories, final_scores, flag_type, random_windows, write_log

DRAFT_DIR = MODELS_DIR / "storyteller-draft-1m"
AGREEMENT_TEMPERATURES = (1.0, 0.8)


@dataclass
class DistillSettings:
    steps: int = 2000
    batch_size: int = 8
    context: int = 512
    peak_lr: float = 1e-3
    warmup_steps: int = 50
    weight_decay: float = 0.1
    eval_every: int = 250
    seed: int = 4321  # not the draft's training seed: new windows, not the same ones again
    bf16_autocast: bool = True


def learning_rate(step: int, s: DistillSettings) -> float:
    """Linear warm-up, then linear decay to a tenth of the peak."""
    if step < s.warmup_steps:
        return s.peak_lr * (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
    return s.peak_lr * (1.0 - 0.9 * progress)


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats per position, p the teacher's softmax and q the student's, over the whole vocabulary."""
    log_q = F.log_softmax(student_logits.float(), dim=-1).reshape(-1, student_logits.shape[-1])
    log_p = F.log_softmax(teacher_logits.float(), dim=-1).reshape(-1, teacher_logits.shape[-1])
    return F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")


@torch.inference_mode()
def agreement(teacher, student, token_ids: list[int], window: int = 512, max_tokens: int = 16384) -> dict:
    """On the first `max_tokens` of `token_ids`, in windows without overlap: the share of positions where the two
    models' top tokens agree, and the mean of sum_x min(p(x), q(x)) at each of AGREEMENT_TEMPERATURES."""
    ids = torch.tensor(token_ids[:max_tokens], dtype=torch.long)
    same_top, overlap, positions = 0, dict.fromkeys(AGREEMENT_TEMPERATURES, 0.0), 0
    for start in range(0, len(ids) - 1, window):
        chunk = ids[start : start + window].unsqueeze(0)
        p_logits = teacher(chunk).logits[0].double()
        q_logits = student(chunk).logits[0].double()
        same_top += int((p_logits.argmax(-1) == q_logits.argmax(-1)).sum())
        for t in AGREEMENT_TEMPERATURES:
            kept = torch.minimum(torch.softmax(p_logits / t, -1), torch.softmax(q_logits / t, -1)).sum(-1)
            overlap[t] += float(kept.sum())
        positions += chunk.shape[1]
    report = {"greedy_agreement": round(same_top / positions, 4)}
    report.update({f"acceptance_t{t:g}": round(total / positions, 4) for t, total in overlap.items()})
    report["positions"] = positions
    return report


def distill(
    s: DistillSettings, teacher_dir: Path, student_dir: Path, corpus_dir: Path, out_dir: Path, heldout: Path | None
) -> dict:
    started = time.time()
    student_meta = json.loads((student_dir / "training_meta.json").read_text())
    split = student_meta["settings"]
    stories = corpus_io.read_stories(corpus_dir)
    train_stories, val_stories = corpus_io.split_train_validation(stories, split["validation_fraction"], split["seed"])
    tokenizer = AutoTokenizer.from_pretrained(student_dir)
    train_stream = torch.tensor(encode_stories(tokenizer, train_stories), dtype=torch.long)
    val_ids = encode_stories(tokenizer, val_stories)

    teacher = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=torch.float32).eval()
    student = AutoModelForCausalLM.from_pretrained(student_dir, dtype=torch.float32)
    if teacher.config.vocab_size != student.config.vocab_size:
        raise ValueError("a draft has to share its target's vocabulary")
    for p in teacher.parameters():
        p.requires_grad_(False)
    optimizer = adamw(student, s.peak_lr, s.weight_decay)
    data_rng = torch.Generator().manual_seed(s.seed)
    out_dir.mkdir(parents=True, exist_ok=True)

    def evaluate(step: int, running: float | None) -> dict:
        student.eval()
        val = score_stream(student, val_ids, corpus_io.utf8_bytes(val_stories), window=s.context, stride=s.context)
        row = {
            "step": step,
            "kl_smoothed": None if running is None else round(running, 4),
            "val_nats_per_token": round(val.nats_per_token, 4),
            "val_bits_per_byte": round(val.bits_per_byte, 4),
            **agreement(teacher, student, val_ids, s.context),
            "elapsed_s": round(time.time() - started, 1),
        }
        print(json.dumps(row), flush=True)
        return row

    log_rows = [evaluate(0, None)]  # the draft as trained on text alone: the baseline
    running = None
    for step in tqdm(range(s.steps), desc="distilling", mininterval=10, file=sys.stdout):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, s)
        batch = random_windows(train_stream, s.batch_size, s.context, data_rng)[:, :-1]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.bf16_autocast):
            with torch.inference_mode():
                teacher_logits = teacher(batch).logits
            student.train()
            student_logits = student(batch).logits
        loss = distillation_loss(student_logits, teacher_logits.clone())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        optimizer.step()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        if (step + 1) % s.eval_every == 0 or step + 1 == s.steps:
            log_rows.append(evaluate(step + 1, running))
            write_log(out_dir / "distillation_log.csv", log_rows)

    student.eval()
    stats = {**student_meta["stats"], **final_scores(student, tokenizer, train_stories, val_stories, heldout)}
    student.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    meta = dict(student_meta)
    meta["stats"] = stats
    meta["distillation"] = {
        "settings": asdict(s),
        "teacher": teacher_dir.name,
        "tokens_seen": s.steps * s.batch_size * s.context,
        "wall_time_s": round(time.time() - started, 1),
        "before": log_rows[0],
        "after": log_rows[-1],
        "command": " ".join(["python", "-m", "inference.training.distill", *sys.argv[1:]]),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    (out_dir / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", type=Path, default=BUNDLED_MODEL_DIR)
    parser.add_argument("--student", type=Path, default=DRAFT_DIR, help="the draft to start from (its weights)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS_DIR)
    parser.add_argument("--heldout", type=Path, default=DEFAULT_HELDOUT_FILE)
    parser.add_argument("--out", type=Path, default=None, help="default: the student's folder, overwritten")
    for name, value in asdict(DistillSettings()).items():
        parser.add_argument("--" + name.replace("_", "-"), type=flag_type(value), default=value)
    args = parser.parse_args(argv)
    if args.corpus.resolve() == args.heldout.resolve().parent:
        parser.error("the held-out folder is for evaluation only: never train on it")
    settings = DistillSettings(**{k: getattr(args, k) for k in asdict(DistillSettings())})
    distill(settings, args.teacher, args.student, args.corpus, args.out or args.student, args.heldout)


if __name__ == "__main__":
    main()
