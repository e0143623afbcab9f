"""The TinyStories text files (`<|endoftext|>` alone on a line after every story; the held-out file is running
text), the tokenizer trained on them, and one token stream."""

from __future__ import annotations

import random
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

STORY_SEPARATOR = "<|endoftext|>"


def read_stories(corpus_dir: Path) -> list[str]:
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
    order = list(range(len(stories)))
    random.Random(seed).shuffle(order)
    n_validation = max(1, int(len(stories) * validation_fraction))
    train = [stories[i] for i in order[:-n_validation]]
    validation = [stories[i] for i in order[-n_validation:]]
    return train, validation


def stories_to_stream(token_lists: list[list[int]], separator_id: int) -> list[int]:
    """`<eot> story <eot> story ... <eot>`: each story starts after a separator, as a prompt does."""
    stream = [separator_id]
    for ids in token_lists:
        stream.extend(ids)
        stream.append(separator_id)
    return stream


def utf8_bytes(texts: list[str]) -> int:
    return sum(len(text.encode("utf-8")) for text in texts)


def train_tokenizer(stories: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (no unknown token) with `<|endoftext|>` as id 0: BOS, EOS, separator and padding, put in front
    of every encoded prompt, so a prompt starts the way every training story does."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[STORY_SEPARATOR],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(stories, trainer=trainer)
    separator_id = tok.token_to_id(STORY_SEPARATOR)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{STORY_SEPARATOR} $A",
        pair=f"{STORY_SEPARATOR} $A {STORY_SEPARATOR} $B",
        special_tokens=[(STORY_SEPARATOR, separator_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=STORY_SEPARATOR,
        eos_token=STORY_SEPARATOR,
        pad_token=STORY_SEPARATOR,
        model_max_length=512,
    )


def encode_stories(tokenizer, stories: list[str]) -> list[int]:
    token_lists = tokenizer(stories, add_special_tokens=False)["input_ids"]
    return stories_to_stream(token_lists, tokenizer.eos_token_id)
