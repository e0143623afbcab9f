"""Distil the draft from its target: the one training loop (`train.fit`) with the KL divergence as its loss.

    python -m inference.training.distill                      # the bundled draft, from its own weights
    python -m inference.training.distill --steps 400 --out /tmp/draft-distilled

Why: speculative sampling keeps a drafted token with probability min(1, p/q), so its acceptance rate is
sum_x min(p(x), q(x)). A draft trained on text learns the text's distribution; one trained to match p (knowledge
distillation, Hinton et al. 2015; for drafts, DistillSpec, Zhou et al. 2023) moves q towards the distribution
acceptance is measured against. The loss is KL(p || q) over the whole vocabulary at every position of windows of
`train.py`'s training split, from the draft's own weights; the teacher is never changed. Each evaluation reports, on
the validation stories (stored text, so close to, not equal to, what the Speculative page measures), the share of
positions where both pick the same top token and the mean of sum_x min(p, q) at temperatures 1 and 0.8.

Writes the folder `train.py` writes, with a "distillation" entry in training_meta.json and distillation_log.csv.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer

from inference.core.forward import TransformersForward
from inference.core.measuring import now
from inference.core.paths import BUNDLED_MODEL_DIR, DEFAULT_CORPUS_DIR, DEFAULT_HELDOUT_FILE, MODELS_DIR
from inference.training import corpus as corpus_io
from inference.training.evaluate import score_stream
from inference.training.train import encode_stories, final_scores, fit, parse, random_windows, run_record, write_log

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


def distillation_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """KL(p || q) in nats per position, p the teacher's softmax and q the student's, over the whole vocabulary."""
    log_q = F.log_softmax(student_logits.float(), dim=-1).reshape(-1, student_logits.shape[-1])
    log_p = F.log_softmax(teacher_logits.float(), dim=-1).reshape(-1, teacher_logits.shape[-1])
    return F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")


def agreement(teacher, student, token_ids: list[int], window: int = 512, max_tokens: int = 16384) -> dict:
    """On the first `max_tokens` of `token_ids`, in windows without overlap: the share of positions where the two
    models' top tokens agree, and the mean of sum_x min(p(x), q(x)) at each of AGREEMENT_TEMPERATURES."""
    ids = token_ids[:max_tokens]
    same_top, overlap, positions = 0, dict.fromkeys(AGREEMENT_TEMPERATURES, 0.0), 0
    for start in range(0, len(ids) - 1, window):
        chunk = ids[start : start + window]
        p_logits, q_logits = (
            TransformersForward(m, None).logits(chunk, len(chunk)).double() for m in (teacher, student)
        )
        same_top += int((p_logits.argmax(-1) == q_logits.argmax(-1)).sum())
        for t in AGREEMENT_TEMPERATURES:
            kept = torch.minimum(torch.softmax(p_logits / t, -1), torch.softmax(q_logits / t, -1)).sum(-1)
            overlap[t] += float(kept.sum())
        positions += len(chunk)
    report = {"greedy_agreement": round(same_top / positions, 4)}
    report.update({f"acceptance_t{t:g}": round(total / positions, 4) for t, total in overlap.items()})
    report["positions"] = positions
    return report


def distill(
    s: DistillSettings, teacher_dir: Path, student_dir: Path, corpus_dir: Path, out_dir: Path, heldout: Path | None
) -> dict:
    started = now()
    student_meta = json.loads((student_dir / "training_meta.json").read_text())
    split = student_meta["settings"]
    stories = corpus_io.read_stories(corpus_dir)
    train_stories, val_stories = corpus_io.split_train_validation(stories, split["validation_fraction"], split["seed"])
    tokenizer = AutoTokenizer.from_pretrained(student_dir)
    train_stream = torch.tensor(encode_stories(tokenizer, train_stories), dtype=torch.long)
    val_ids = encode_stories(tokenizer, val_stories)
    teacher = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=torch.float32).eval().requires_grad_(False)
    student = AutoModelForCausalLM.from_pretrained(student_dir, dtype=torch.float32)
    if teacher.config.vocab_size != student.config.vocab_size:
        raise ValueError("a draft has to share its target's vocabulary")
    data_rng = torch.Generator().manual_seed(s.seed)
    out_dir.mkdir(parents=True, exist_ok=True)

    def loss_fn() -> torch.Tensor:
        batch = random_windows(train_stream, s.batch_size, s.context, data_rng)[:, :-1]
        with torch.inference_mode():
            teacher_logits = teacher(batch).logits
        return distillation_loss(student(batch).logits, teacher_logits.clone())

    def evaluate(step: int) -> dict:
        val = score_stream(student, val_ids, corpus_io.utf8_bytes(val_stories), window=s.context, stride=s.context)
        scores = {"val_nats_per_token": round(val.nats_per_token, 4), "val_bits_per_byte": round(val.bits_per_byte, 4)}
        return {**scores, **agreement(teacher, student, val_ids, s.context)}

    before = {"step": 0, "loss_smoothed": None, **evaluate(0)}  # the draft as trained on text alone: the baseline
    rows = fit(student, list(student.parameters()), loss_fn, s, s.steps, s.peak_lr, evaluate)
    write_log(out_dir / "distillation_log.csv", [before, *rows])
    stats = {**student_meta["stats"], **final_scores(student, tokenizer, train_stories, val_stories, heldout)}
    student.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    meta = {**student_meta, "stats": stats}
    meta["distillation"] = {
        "settings": asdict(s),
        "teacher": teacher_dir.name,
        "tokens_seen": s.steps * s.batch_size * s.context,
        "wall_time_s": round(now() - started, 1),
        "before": before,
        "after": rows[-1],
        **run_record("distill"),
    }
    (out_dir / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None):
    s, args = parse(
        DistillSettings,
        argv,
        __doc__,
        teacher=BUNDLED_MODEL_DIR,
        student=DRAFT_DIR,
        corpus=DEFAULT_CORPUS_DIR,
        heldout=DEFAULT_HELDOUT_FILE,
        out=None,
    )
    distill(s, args.teacher, args.student, args.corpus, args.out or args.student, args.heldout)


if __name__ == "__main__":
    main()
