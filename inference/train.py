"""Train the bundled model: a byte-level BPE tokenizer, then a small Llama, from scratch.

    python -m inference.train                       # corpus ../shared/corpus/tinystories
    python -m inference.train --corpus DIR --steps 3000 --out assets/models/NAME

Writes a Hugging Face folder (config, generation config, safetensors weights, tokenizer,
training log, MODEL_CARD.md) that `AutoModelForCausalLM.from_pretrained` loads with no
project code. The held-out file is only ever scored, never trained on.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from tqdm import tqdm
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from inference import corpus as corpus_io
from inference.evaluate import score_stream
from inference.paths import BUNDLED_MODEL_DIR, DEFAULT_CORPUS_DIR, DEFAULT_HELDOUT_FILE

SEPARATOR = corpus_io.STORY_SEPARATOR


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


def train_tokenizer(stories: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (any UTF-8 text encodes, no unknown token) with `<|endoftext|>` as
    id 0, used as BOS, EOS, story separator and padding. The post-processor puts it in
    front of every encoded prompt, so a prompt starts the way every training story does."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[SEPARATOR],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(stories, trainer=trainer)
    separator_id = tok.token_to_id(SEPARATOR)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{SEPARATOR} $A", pair=f"{SEPARATOR} $A {SEPARATOR} $B", special_tokens=[(SEPARATOR, separator_id)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=SEPARATOR, eos_token=SEPARATOR, pad_token=SEPARATOR,
        model_max_length=512,
    )


def encode_stories(tokenizer, stories: list[str]) -> list[int]:
    token_lists = tokenizer(stories, add_special_tokens=False)["input_ids"]
    return corpus_io.stories_to_stream(token_lists, tokenizer.eos_token_id)


def build_model(s: TrainSettings) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=s.vocab_size,
        hidden_size=s.hidden_size,
        intermediate_size=s.intermediate_size,
        num_hidden_layers=s.num_layers,
        num_attention_heads=s.num_heads,
        num_key_value_heads=s.num_kv_heads,
        max_position_embeddings=s.context,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        initializer_range=0.02,
    )
    torch.manual_seed(s.seed)  # weight init is the only use of the global RNG, and it is seeded
    return LlamaForCausalLM(config)


def learning_rate(step: int, s: TrainSettings) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < s.warmup_steps:
        return s.peak_lr * (step + 1) / s.warmup_steps
    progress = (step - s.warmup_steps) / max(1, s.steps - s.warmup_steps)
    return s.peak_lr * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def random_windows(stream: torch.Tensor, batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - length - 1, (batch,), generator=gen)
    return torch.stack([stream[i : i + length + 1] for i in starts.tolist()])


def train(s: TrainSettings, corpus_dir: Path, out_dir: Path, heldout_file: Path | None) -> dict:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    started = time.time()
    stories = corpus_io.read_stories(corpus_dir)
    train_stories, val_stories = corpus_io.split_train_validation(stories, s.validation_fraction, s.seed)
    tokenizer = train_tokenizer(train_stories, s.vocab_size)
    train_stream = torch.tensor(encode_stories(tokenizer, train_stories), dtype=torch.long)
    val_ids = encode_stories(tokenizer, val_stories)
    print(
        f"{len(train_stories)} train / {len(val_stories)} validation stories; "
        f"{len(train_stream):,} train tokens, {len(val_ids):,} validation tokens; "
        f"{corpus_io.utf8_bytes(train_stories) / len(train_stream):.2f} bytes/token",
        flush=True,
    )

    model = build_model(s)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=s.peak_lr, betas=(0.9, 0.95),
    )
    data_rng = torch.Generator().manual_seed(s.seed)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_rows = []
    running = None
    progress = tqdm(range(s.steps), desc="training", mininterval=5, file=sys.stdout)
    for step in progress:
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, s)
        batch = random_windows(train_stream, s.batch_size, s.context, data_rng)
        model.train()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=s.bf16_autocast):
            logits = model(batch[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        progress.set_postfix(loss=f"{running:.3f}")
        if (step + 1) % s.eval_every == 0 or step + 1 == s.steps:
            model.eval()
            val = score_stream(model, val_ids, corpus_io.utf8_bytes(val_stories), window=s.context, stride=s.context)
            row = {
                "step": step + 1,
                "tokens_seen": (step + 1) * s.batch_size * s.context,
                "train_loss_smoothed": round(running, 4),
                "val_nats_per_token": round(val.nats_per_token, 4),
                "val_bits_per_byte": round(val.bits_per_byte, 4),
                "elapsed_s": round(time.time() - started, 1),
            }
            log_rows.append(row)
            print(json.dumps(row), flush=True)
            with open(out_dir / "training_log.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=list(row))
                writer.writeheader()
                writer.writerows(log_rows)

    model.eval()
    train_seconds = time.time() - started
    # Final figures with overlapping windows (each token sees at least half a window of context).
    train_sample = train_stories[: len(val_stories)]
    final_train = score_stream(model, encode_stories(tokenizer, train_sample), corpus_io.utf8_bytes(train_sample))
    final_val = score_stream(model, val_ids, corpus_io.utf8_bytes(val_stories))
    stats = {
        "parameters": n_params,
        "tokens_seen": s.steps * s.batch_size * s.context,
        "train_tokens_in_corpus": len(train_stream),
        "wall_time_s": round(train_seconds, 1),
        "train_nats_per_token": round(final_train.nats_per_token, 4),
        "train_bits_per_byte": round(final_train.bits_per_byte, 4),
        "val_nats_per_token": round(final_val.nats_per_token, 4),
        "val_bits_per_byte": round(final_val.bits_per_byte, 4),
    }
    if heldout_file is not None and heldout_file.exists():
        text = heldout_file.read_text(encoding="utf-8")
        held = score_stream(model, tokenizer(text)["input_ids"], len(text.encode("utf-8")))
        stats["heldout_nats_per_token"] = round(held.nats_per_token, 4)
        stats["heldout_bits_per_byte"] = round(held.bits_per_byte, 4)
    print(json.dumps(stats), flush=True)

    model.save_pretrained(out_dir, safe_serialization=True)
    GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=0, max_new_tokens=200).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    meta = {
        "settings": asdict(s),
        "stats": stats,
        "corpus": str(corpus_dir.name),
        "corpus_files": sorted(p.name for p in Path(corpus_dir).glob("*.txt")),
        "command": " ".join(["python", "-m", "inference.train", *sys.argv[1:]]),
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
    (out_dir / "training_meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS_DIR)
    parser.add_argument("--heldout", type=Path, default=DEFAULT_HELDOUT_FILE)
    parser.add_argument("--out", type=Path, default=BUNDLED_MODEL_DIR)
    defaults = TrainSettings()
    for name, value in asdict(defaults).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            parser.add_argument(flag, type=lambda v: v.lower() in ("1", "true", "yes"), default=value)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    args = parser.parse_args(argv)
    settings = TrainSettings(**{k: getattr(args, k) for k in asdict(defaults)})
    if args.corpus.resolve() == args.heldout.resolve().parent:
        parser.error("the held-out folder is for evaluation only: never train on it")
    train(settings, args.corpus, args.out, args.heldout)


if __name__ == "__main__":
    main()
