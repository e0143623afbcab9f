"""How often each token occurs in a bundled draft's training split (separators included, never the held-out file):
`token_frequency.json` beside its weights, so the Speculative page's draft can score only its most frequent tokens
(FR-Spec: the output layer is most of a draft's work). The app reads the JSON, never the corpus.

    python -m inference.training.token_frequency                 # the draft model (storyteller-draft-1m)
    python -m inference.training.token_frequency --model assets/models/NAME
"""

from __future__ import annotations

import argparse
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer

from inference.core.paths import DEFAULT_CORPUS_DIR, MODELS_DIR
from inference.training import corpus as corpus_io

FILE_NAME = "token_frequency.json"
IGNORE = -100  # F.cross_entropy's ignore_index: a target outside the shortlist
DRAFT_DIR = MODELS_DIR / "storyteller-draft-1m"


def count_tokens(model_dir: Path, corpus_dir: Path) -> np.ndarray:
    """The model's training split counted again (its own split settings), checked against its recorded size."""
    meta = json.loads((model_dir / "training_meta.json").read_text())
    settings = meta["settings"]
    stories = corpus_io.read_stories(corpus_dir)
    train, _ = corpus_io.split_train_validation(stories, settings["validation_fraction"], settings["seed"])
    stream = np.asarray(corpus_io.encode_stories(AutoTokenizer.from_pretrained(model_dir), train), dtype=np.int64)
    if len(stream) != meta["stats"]["train_tokens_in_corpus"]:  # another corpus or split than it was trained on
        raise ValueError(
            f"{len(stream):,} training tokens here, not the {meta['stats']['train_tokens_in_corpus']:,} trained on"
        )
    return np.bincount(stream, minlength=settings["vocab_size"])


def write_counts(model_dir: Path, counts: np.ndarray, what: str, corpus_files: list[str]) -> Path:
    counted = {"what": f"how often each token id occurs in {what}", "model": Path(model_dir).name,
               "corpus_files": corpus_files, "train_tokens": int(counts.sum()), "counts": counts.tolist()}  # fmt: skip
    (Path(model_dir) / FILE_NAME).write_text(json.dumps(counted, separators=(",", ":")) + "\n")
    return Path(model_dir) / FILE_NAME


@lru_cache(maxsize=8)
def _counts(path: str, modified: float) -> np.ndarray | None:
    try:
        counts = np.asarray(json.loads(Path(path).read_text())["counts"], dtype=np.int64)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return counts if counts.ndim == 1 and len(counts) and (counts >= 0).all() else None


def token_counts(model_dir: Path | str | None) -> np.ndarray | None:
    """The draft's training-text count of every token id, or None when the folder has no readable counts."""
    if model_dir is None:
        return None
    path = Path(model_dir) / FILE_NAME
    try:
        modified = path.stat().st_mtime
    except OSError:
        return None
    return _counts(str(path), modified)


def most_frequent(counts: np.ndarray, size: int) -> list[int]:
    """The `size` most frequent token ids (ties: the lower id first), in id order."""
    order = np.argsort(-counts, kind="stable")[:size]
    return sorted(order.tolist())


def coverage(counts: np.ndarray, size: int) -> float:
    """The share of the training text's tokens that are among the `size` most frequent: computed exactly."""
    total = counts.sum()
    return float(np.sort(counts)[::-1][:size].sum() / total) if total else 0.0


def shortlist_index(rows: torch.Tensor, vocab: int) -> torch.Tensor:
    """[vocab]: each token id's position in the shortlist `rows`, IGNORE outside it."""
    index = torch.full((vocab,), IGNORE, dtype=torch.long)
    index[rows] = torch.arange(len(rows))
    return index


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=DRAFT_DIR)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS_DIR)
    args = parser.parse_args(argv)
    files = json.loads((args.model / "training_meta.json").read_text())["corpus_files"]
    counts = count_tokens(args.model, args.corpus)
    path = write_counts(args.model, counts, "the model's training split (separators included)", files)
    print(f"{int(counts.sum()):,} tokens counted into {path}")


if __name__ == "__main__":
    main()
