"""A small draft for SmolLM2-135M-Instruct: a plain Llama over SmolLM2's tokenizer and vocabulary (2 layers of 256,
tied embeddings, the embedding starting as SmolLM2's projected on its top principal directions), trained by
`train.fit` first on TinyStories' training text, then on SmolLM2's own greedy replies (`teacher_text`, the loss on the
reply only), scored over the `shortlist` most frequent tokens of that text (the output layer is most of the work).

    python -m inference.training.teacher_text --out /tmp/draft/teacher.jsonl           # the teacher's replies first
    python -m inference.training.distill_real --replies /tmp/draft/teacher.jsonl       # -> assets/models/smollm2-draft-14m
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

from inference.core import real_model
from inference.core.measuring import now
from inference.core.model_config import decoder_config_fields
from inference.core.paths import DEFAULT_CORPUS_DIR, MODELS_DIR
from inference.training import corpus as corpus_io
from inference.training.teacher_text import described, read_replies, split_replies, training_stories
from inference.training.token_frequency import IGNORE, coverage, most_frequent, shortlist_index, write_counts
from inference.training.train import (
    TrainSettings,
    fit,
    next_token_cross_entropy,
    parse,
    random_windows,
    run_record,
    write_log,
)

DRAFT_NAME = "smollm2-draft-14m"
OUT_DIR = MODELS_DIR / DRAFT_NAME
STORY_SEPARATOR_ID = 0  # <|endoftext|>: SmolLM2's end of a pretraining document


@dataclass
class DraftSettings:
    hidden_size: int = 256
    intermediate_size: int = 768
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    max_positions: int = 2048
    context: int = 256  # story windows
    batch_size: int = 16
    story_steps: int = 300
    reply_steps: int = 400
    peak_lr: float = 3e-3
    reply_lr: float = 2e-3
    warmup_steps: int = 40
    weight_decay: float = 0.1
    shortlist: int = 8192
    heldout_every: int = 20  # one request in 20 held out
    eval_every: int = 100
    seed: int = 2026
    bf16_autocast: bool = True


def principal_embedding(weight: torch.Tensor, width: int) -> torch.Tensor:
    """`weight`'s rows on its `width` top principal directions, at the initialiser's scale (RMS 0.02)."""
    centred = weight.float() - weight.float().mean(0)
    _, _, v = torch.linalg.svd(centred, full_matrices=False)  # v [d, d], rows the directions
    projected = centred @ v[:width].T
    return projected / projected.std() * 0.02


def build_draft(s: DraftSettings, teacher) -> LlamaForCausalLM:
    t = teacher.config
    config = LlamaConfig(
        **decoder_config_fields(
            t.vocab_size, s.hidden_size, s.num_layers, s.num_heads, s.num_kv_heads, s.max_positions
        ),
        intermediate_size=s.intermediate_size,
        bos_token_id=t.bos_token_id,
        eos_token_id=t.eos_token_id,
        pad_token_id=t.pad_token_id,
        rope_parameters=dict(t.rope_parameters),
        rms_norm_eps=t.rms_norm_eps,
        initializer_range=0.02,
    )
    gen = torch.Generator().manual_seed(s.seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
        model.get_input_embeddings().weight.copy_(
            principal_embedding(teacher.get_input_embeddings().weight, s.hidden_size)
        )
    return model


def token_counts(stream: list[int], replies: list[dict], vocab: int) -> np.ndarray:
    return np.bincount(np.asarray(stream + [i for row in replies for i in row["reply_ids"]]), minlength=vocab)


def shortlist_logits(model, ids: torch.Tensor, rows: torch.Tensor, delta: torch.Tensor | None = None) -> torch.Tensor:
    """The logits of the shortlisted rows only. `delta` (training): what training adds to those rows of the tied
    embedding, as input and output, so the optimiser never touches the 49,152-row matrix."""
    table = model.get_input_embeddings().weight
    if delta is None:
        hidden = model.get_decoder()(input_ids=ids).last_hidden_state
        return F.linear(hidden, table[rows])
    position = torch.full((table.shape[0],), -1, dtype=torch.long)
    position[rows] = torch.arange(len(rows))
    at = position[ids]  # [batch, T]: each input's shortlist position, -1 outside it
    extra = torch.where((at >= 0).unsqueeze(-1), delta[at.clamp(min=0)], 0.0)
    hidden = model.get_decoder()(inputs_embeds=F.embedding(ids, table) + extra).last_hidden_state
    return F.linear(hidden, table[rows] + delta)


def reply_batch(rows: list[dict], gen: torch.Generator, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` random requests: ids (prompt then reply, padded) and targets (IGNORE but on the reply)."""
    picks = torch.randint(0, len(rows), (batch,), generator=gen).tolist()
    seqs = [rows[i]["prompt_ids"] + rows[i]["reply_ids"] for i in picks]
    width = max(len(seq) for seq in seqs)
    ids = torch.full((batch, width), STORY_SEPARATOR_ID, dtype=torch.long)
    targets = torch.full((batch, width), IGNORE, dtype=torch.long)
    for b, (i, seq) in enumerate(zip(picks, seqs, strict=True)):
        ids[b, : len(seq)] = torch.tensor(seq)
        start = len(rows[i]["prompt_ids"])
        targets[b, start : len(seq)] = torch.tensor(rows[i]["reply_ids"])
    return ids, targets


@torch.inference_mode()
def reply_agreement(model, rows: list[dict], short: torch.Tensor, delta: torch.Tensor | None = None) -> dict:
    """The share of reply tokens that are the draft's top shortlisted token (greedy acceptance), all and first 60."""
    model.eval()
    same = total = same_60 = total_60 = 0
    for row in rows:
        ids = torch.tensor([row["prompt_ids"] + row["reply_ids"]])
        logits = shortlist_logits(model, ids, short, delta)[0]
        start = len(row["prompt_ids"])
        picked = short[logits[start - 1 : -1].argmax(-1)]
        hits = (picked == torch.tensor(row["reply_ids"])).tolist()
        same, total = same + sum(hits), total + len(hits)
        same_60, total_60 = same_60 + sum(hits[:60]), total_60 + len(hits[:60])
    return {"reply_agreement": round(same / total, 4), "reply_agreement_first60": round(same_60 / total_60, 4)}


def train_draft(
    s: DraftSettings, replies_path: Path, corpus_dir: Path, out_dir: Path, init: Path | None = None
) -> dict:
    """Both phases, then the folder the page loads. `init`: a draft this wrote before, trained further."""
    started = now()
    teacher_dir = real_model.real_model_folder()
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir)
    teacher = AutoModelForCausalLM.from_pretrained(teacher_dir, dtype=torch.float32)
    stories = training_stories(corpus_dir)
    stream = corpus_io.stories_to_stream(tokenizer(stories, add_special_tokens=False)["input_ids"], STORY_SEPARATOR_ID)
    train_rows, held_rows = split_replies(read_replies(replies_path), s.heldout_every)
    vocab = teacher.config.vocab_size
    short = torch.tensor(most_frequent(token_counts(stream, train_rows, vocab), s.shortlist))
    index = shortlist_index(short, vocab)
    print(f"{len(stories)} stories, {len(stream):,} tokens; {len(train_rows)} replies, {len(held_rows)} held out")
    model = build_draft(s, teacher) if init is None else LlamaForCausalLM.from_pretrained(init, dtype=torch.float32)
    del teacher
    model.get_input_embeddings().weight.requires_grad_(False)  # trained through `delta`, on the shortlist's rows
    delta = torch.nn.Parameter(torch.zeros(len(short), s.hidden_size))
    params = [p for p in model.parameters() if p.requires_grad] + [delta]
    stream_t = torch.tensor(stream, dtype=torch.long)
    gen = torch.Generator().manual_seed(s.seed)
    out_dir.mkdir(parents=True, exist_ok=True)

    def loss_of(ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        labels = torch.where(targets >= 0, index[targets.clamp(min=0)], IGNORE)
        return next_token_cross_entropy(shortlist_logits(model, ids[:, :-1], short, delta), labels)

    def story_loss() -> torch.Tensor:
        window = random_windows(stream_t, s.batch_size, s.context, gen)
        return loss_of(window, window)

    def reply_loss() -> torch.Tensor:
        return loss_of(*reply_batch(train_rows, gen, s.batch_size))

    def agreement(step: int) -> dict:
        return reply_agreement(model, held_rows, short, delta)

    log = [{"phase": "start", "step": 0, **agreement(0)}]
    log += [{"phase": "stories", **r} for r in fit(model, params, story_loss, s, s.story_steps, s.peak_lr, agreement)]
    # the replies file is read again: the teacher may have written more while the stories phase ran
    train_rows, held_rows = split_replies(read_replies(replies_path), s.heldout_every)
    log += [{"phase": "replies", **r} for r in fit(model, params, reply_loss, s, s.reply_steps, s.reply_lr, agreement)]
    with torch.no_grad():  # a plain LlamaForCausalLM again
        model.get_input_embeddings().weight[short] += delta
    log.append({"phase": "saved", "step": 0, **reply_agreement(model, held_rows, short)})  # the plain model
    write_log(out_dir / "training_log.csv", log)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)  # our own copy; loaded as float32
    c = model.config
    GenerationConfig(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=0).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    counts = token_counts(stream, train_rows, vocab)  # the counts the page's shortlist ranks (every reply trained on)
    corpus_files = sorted(p.name for p in Path(corpus_dir).glob("*.txt"))
    write_counts(out_dir, counts, "the draft's training text (stories with separators, and replies)", corpus_files)
    meta = {
        "settings": {**asdict(s), "vocab_size": vocab, "validation_fraction": TrainSettings().validation_fraction},
        "preset": "draft",  # the model picker's role: a draft for speculative decoding
        "teacher": real_model.REAL_MODEL_LINE,
        "teacher_text": described(replies_path, train_rows, held_rows),
        "stats": {
            "parameters": sum(p.numel() for p in model.parameters()),
            "train_tokens_in_corpus": len(stream),
            "story_tokens_seen": s.story_steps * s.batch_size * s.context,
            "shortlist_coverage_text": round(coverage(counts, s.shortlist), 4),
            "wall_time_s": round(now() - started, 1),
            "before": log[0],
            "after": log[-1],
        },
        "corpus": Path(corpus_dir).name,
        "corpus_files": corpus_files,
        # a run that trained a saved draft further keeps that draft's record (its stories phase is there)
        "earlier": None if init is None else json.loads((init / "training_meta.json").read_text()),
        **run_record("distill_real"),
    }
    (out_dir / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None) -> None:
    paths = dict(replies=Path("/tmp/draft/teacher.jsonl"), corpus=DEFAULT_CORPUS_DIR, out=OUT_DIR, init=None)
    s, args = parse(DraftSettings, argv, __doc__, **paths)
    train_draft(s, args.replies, args.corpus, args.out, args.init)


if __name__ == "__main__":
    main()
