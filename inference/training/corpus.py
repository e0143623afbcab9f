"""Reading the TinyStories text files and turning them into one token stream.

The corpus files put `<|endoftext|>` alone on a line after every story. The held-out file
does not mark stories at all, so it is read as running text.
"""

from __future__ import annotations

import random
from pathlib import Path

STORY_SEPARATOR = "<|endoftext|>"


def read_stories(corpus_dir: Path) -> list[str]:
    """All stories from every `*.txt` file under `corpus_dir`, in a fixed (sorted) order."""
    files = sorted(Path(corpus_dir).glob("*.txt"))
    if not files:
        raise FileNotFoundError(f"No .txt files in corpus folder {corpus_dir}")
    stories = []
    for path in files:
        for chunk in path.read_text(encoding="utf-8").split(STORY_SEPARATOR):
            story = chunk.strip()
            if story:
                stories.append(story)
    return stories


def split_train_validation(stories: list[str], validation_fraction: float, seed: int):
    """A seeded shuffle, then the last `validation_fraction` of stories for validation."""
    order = list(range(len(stories)))
    random.Random(seed).shuffle(order)
    n_validation = max(1, int(len(stories) * validation_fraction))
    train = [stories[i] for i in order[:-n_validation]]
    validation = [stories[i] for i in order[-n_validation:]]
    return train, validation


def stories_to_stream(token_lists: list[list[int]], separator_id: int) -> list[int]:
    """`<eot> story <eot> story ... <eot>`: each story starts after a separator (its BOS)
    and is followed by one (its EOS), exactly as a prompt looks at inference time."""
    stream = [separator_id]
    for ids in token_lists:
        stream.extend(ids)
        stream.append(separator_id)
    return stream


def utf8_bytes(texts: list[str]) -> int:
    return sum(len(text.encode("utf-8")) for text in texts)
