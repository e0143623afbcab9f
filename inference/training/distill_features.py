"""Train SmolLM2's feature draft (EAGLE-style, `inference.lessons.speculative.feature_draft`) on SmolLM2's own replies.

    python -m inference.training.teacher_text --mixed --batch 64 --out /tmp/draft/mixed.jsonl --minutes 45
    python -m inference.training.distill_features --replies /tmp/draft/mixed.jsonl --steps 800

One teacher-forced pass of SmolLM2 per reply gives each position's last-layer output h_j and the target's argmax after
it (kept in memory, bfloat16). The draft (one decoder layer initialised from SmolLM2's last, and `fc`, which mixes
[embedding of x_{j+1}, norm(h_j)] into its input, starting as "pass the feature through") learns the argmax after the
next position: cross-entropy over a shortlist of the replies' most frequent tokens, plus a smooth-L1 pull towards
norm(h_{j+1}) (EAGLE's feature regression), with noise on its input features. `train.fit` with this loss; one request
in `--heldout-every` held out, its greedy agreement kept in training_meta.json.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import LlamaModel

from inference.core import real_model
from inference.core.forward import TransformersForward
from inference.core.loader import load_model
from inference.core.measuring import now
from inference.training import feature_model as feature_draft
from inference.training.feature_model import FEATURE_DRAFT_DIR
from inference.training.teacher_text import described, read_replies, split_replies
from inference.training.token_frequency import IGNORE, most_frequent, shortlist_index
from inference.training.train import fit, parse, run_record


@dataclass
class FeatureSettings:
    steps: int = 800
    batch_size: int = 8
    window: int = 128
    peak_lr: float = 1e-3
    warmup_steps: int = 30
    regression_weight: float = 1.0
    input_noise: float = 0.2  # uniform noise on the input features, times their standard deviation
    second_step_weight: float = 0.0  # weight of the loss on the second drafted token (read from its own prediction)
    shortlist: int = 8192
    heldout_every: int = 20
    seed: int = 2026
    weight_decay: float = 0.0
    eval_every: int = 50
    bf16_autocast: bool = False


def reply_features(model, rows: list[dict]) -> list[dict]:
    """Each reply's ids, the target's last-layer outputs and argmax at every position: one teacher-forced pass in
    bfloat16 autocast (~4x faster than float32 on this Xeon's AMX, 2026-12-04)."""
    kept, tokens, start = [], 0, now()
    for i, row in enumerate(rows):
        seq = row["prompt_ids"] + row["reply_ids"]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits, features = TransformersForward(model, None).logits_and_features(seq, keep=len(seq))
        kept.append(
            {
                "ids": torch.tensor(seq),
                "features": features.to(torch.bfloat16),
                "argmax": logits.argmax(-1),
                "reply_start": len(row["prompt_ids"]),
            }
        )
        tokens += len(seq)
        if i % 100 == 0:
            print(f"features: {i}/{len(rows)} replies, {tokens / (now() - start):.0f} tokens/s", flush=True)
    return kept


def token_counts_of(sequences: list[dict], vocab: int) -> torch.Tensor:
    counts = torch.zeros(vocab, dtype=torch.long)
    for s in sequences:
        counts += torch.bincount(s["argmax"], minlength=vocab)
    return counts


def random_batch(sequences, index, s: FeatureSettings, gen: torch.Generator):
    """Windows of `s.window` positions: tokens x_{j+1}, features h_j, labels (argmax at j+1) and targets h_{j+1}."""
    tokens, inputs, labels, targets = [], [], [], []
    for _ in range(s.batch_size):
        seq = sequences[int(torch.randint(len(sequences), (1,), generator=gen))]
        n = len(seq["ids"])
        at = int(torch.randint(max(1, n - s.window - 1), (1,), generator=gen))
        ids, feats, argmax = (seq[k][at : at + s.window + 1] for k in ("ids", "features", "argmax"))
        pad = s.window - (len(ids) - 1)
        tokens.append(F.pad(ids[1:], (0, pad)))
        inputs.append(F.pad(feats[:-1].float(), (0, 0, 0, pad)))
        labels.append(F.pad(index[argmax[1:]], (0, pad), value=IGNORE))
        targets.append(F.pad(feats[1:].float(), (0, 0, 0, pad)))
    return torch.stack(tokens), torch.stack(inputs), torch.stack(labels), torch.stack(targets)


def draft_outputs(draft_body, fc, embedding, norm, tokens, features):
    """The body's outputs for positions (x_{j+1}, h_j): what `FeatureDrafter._pass` computes, for a batch."""
    mixed = fc(torch.cat([embedding(tokens), norm(features)], dim=-1))
    return draft_body(inputs_embeds=mixed).last_hidden_state


def second_step_loss(draft_body, fc, embedding, short_head, tokens, first_outputs, labels) -> torch.Tensor:
    """Cross-entropy of the second drafted token, read from the draft's own predicted feature at every position at once
    (a cheap stand-in for EAGLE-3's training-time test)."""
    mixed = fc(torch.cat([embedding(tokens[:, 1:]), first_outputs[:, :-1]], dim=-1))
    logits = draft_body(inputs_embeds=mixed).last_hidden_state @ short_head.T
    return F.cross_entropy(logits.reshape(-1, short_head.shape[0]), labels[:, 1:].reshape(-1), ignore_index=IGNORE)


@torch.no_grad()
def heldout_agreement(draft_body, fc, target, rows: torch.Tensor, sequences: list[dict]) -> float:
    """The share of reply positions where the draft's first guess is the target's next token."""
    head = target.get_output_embeddings().weight[rows]
    same = total = 0
    for seq in sequences:
        ids, feats = seq["ids"], seq["features"].float()
        out = draft_outputs(
            draft_body, fc, target.get_input_embeddings(), target.model.norm, ids[None, 1:], feats[None, :-1]
        )
        guess = rows[(out[0] @ head.T).argmax(-1)]  # out[j] guesses the target's argmax at j + 1
        start = seq["reply_start"] - 2  # out[start] guesses the reply's first token
        same += int((guess[start:] == seq["argmax"][start + 1 :]).sum())
        total += len(guess) - start
    return same / max(total, 1)


def train(settings: FeatureSettings, replies: Path, out: Path, features_cache: Path | None = None) -> dict:
    torch.manual_seed(settings.seed)
    started = now()
    target = load_model(real_model.REAL_MODEL_NAME).model
    train_rows, held_rows = split_replies(read_replies(replies), settings.heldout_every)
    print(f"{len(train_rows)} replies to train on, {len(held_rows)} held out", flush=True)
    if features_cache is not None and features_cache.is_file():
        train_seqs, held_seqs = torch.load(features_cache)
    else:
        train_seqs, held_seqs = reply_features(target, train_rows), reply_features(target, held_rows)
        if features_cache is not None:  # a second training on the same text skips the extraction
            torch.save((train_seqs, held_seqs), features_cache)
    vocab = target.get_output_embeddings().weight.shape[0]
    rows = torch.tensor(sorted(most_frequent(token_counts_of(train_seqs, vocab).numpy(), settings.shortlist)))
    index = shortlist_index(rows, vocab)

    config = feature_draft.body_config(target.config)
    body = LlamaModel(config)
    body.layers[0].load_state_dict(target.model.layers[-1].state_dict())
    body.norm.load_state_dict(target.model.norm.state_dict())
    fc = torch.nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
    with torch.no_grad():
        fc.weight.zero_()
        fc.weight[:, config.hidden_size :] = torch.eye(config.hidden_size)
    embedding, norm, head = target.get_input_embeddings(), target.model.norm, target.get_output_embeddings().weight
    target.requires_grad_(False)
    params = [p for name, p in body.named_parameters() if not name.startswith("embed_tokens")] + list(fc.parameters())
    gen = torch.Generator().manual_seed(settings.seed)
    short_head = head[rows].detach()

    def loss_fn() -> torch.Tensor:
        tokens, inputs, labels, targets = random_batch(train_seqs, index, settings, gen)
        inputs = inputs + (torch.rand_like(inputs) - 0.5) * settings.input_noise * inputs.std()
        out_h = draft_outputs(body, fc, embedding, norm, tokens, inputs)
        logits = out_h @ short_head.T
        loss = F.cross_entropy(logits.reshape(-1, len(rows)), labels.reshape(-1), ignore_index=IGNORE)
        with torch.no_grad():
            pulled = norm(targets)
        loss = loss + settings.regression_weight * F.smooth_l1_loss(out_h, pulled)
        if settings.second_step_weight:
            second = second_step_loss(body, fc, embedding, short_head, tokens, out_h, labels)
            loss = loss + settings.second_step_weight * second
        return loss

    log = fit(body, params, loss_fn, settings, settings.steps, settings.peak_lr)
    agreement = heldout_agreement(body, fc, target, rows, held_seqs)
    print(f"held-out greedy agreement of the first guess: {agreement:.3f}", flush=True)

    out.mkdir(parents=True, exist_ok=True)
    config.target_vocab_rows = int(vocab)
    config.save_pretrained(out)
    # bfloat16 on disk (8 MB instead of 17), float32 when loaded, as the distilled draft ships
    kept = {k: v for k, v in body.state_dict().items() if not k.startswith("embed_tokens")}
    tensors = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in kept.items()}
    tensors[feature_draft.FC_KEY] = fc.weight.detach().to(torch.bfloat16).contiguous()
    tensors[feature_draft.ROWS_KEY] = rows.to(torch.int32)
    save_file(tensors, str(out / feature_draft.WEIGHTS_FILE))
    meta = {
        "settings": asdict(settings),
        "target": real_model.REAL_MODEL_LINE,
        "teacher_text": described(replies, train_rows, held_rows),
        "heldout_first_guess_agreement": round(agreement, 4),
        "training_seconds": round(now() - started),
        "torch_threads": torch.get_num_threads(),
        "log": log,
        **run_record("distill_features"),
    }
    (out / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None) -> None:
    replies = Path("/tmp/draft/mixed.jsonl")
    # --features-cache: keep the extracted features there (never in the repository)
    s, args = parse(FeatureSettings, argv, __doc__, replies=replies, out=FEATURE_DRAFT_DIR, features_cache=None)
    train(s, args.replies, args.out, args.features_cache)


if __name__ == "__main__":
    main()
