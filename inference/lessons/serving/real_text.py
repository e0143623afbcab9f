"""Real prompts for a trace served on a real model: questions a class understands (short chat) or a text to
summarise (long document), in the model's chat template and tokenized by its own tokenizer, so the Gantt's rows
are requests a person would send and their replies can be read. The arrivals and reply lengths stay the seeded
draws of `request_trace`; a prompt's length is its text's."""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from transformers import AutoTokenizer

from inference.core import real_model
from inference.lessons.serving.request_trace import Trace

SOURCE = "real text"

QUESTIONS = (
    "What is the capital of France?",
    "Why is the sky blue?",
    "Write a short poem about the sea.",
    "How many legs does a spider have?",
    "What is photosynthesis?",
    "Give me three tips for a good night's sleep.",
    "What is the largest planet in the solar system?",
    "Explain what a computer does in one sentence.",
    "Who wrote Romeo and Juliet?",
    "Why do leaves change colour in autumn?",
    "What is 12 times 12?",
    "Tell me a fun fact about octopuses.",
    "How does a rainbow form?",
    "What should I pack for a day at the beach?",
    "What is the boiling point of water?",
    "Suggest a name for a friendly robot.",
)

DOCUMENT = (
    "The water cycle moves water between the sea, the air and the land. The sun warms the surface of the sea, "
    "and some of the water evaporates: it becomes a gas, water vapour, and rises with the warm air. High above "
    "the ground the air is colder, so the vapour condenses into tiny droplets that gather as clouds. When the "
    "droplets join into drops too heavy to float, they fall as rain, or as snow where the air is cold enough. "
    "Some of that water runs over the ground into streams and rivers, which carry it back to the sea. Some soaks "
    "into the soil, where plants take it up through their roots and release it again through their leaves. Some "
    "sinks deeper and is stored for years as groundwater, which feeds springs and wells. Snow on high mountains "
    "can stay frozen for a whole winter and melt in spring, filling rivers just when farmers need water for their "
    "fields. Because the sun lifts only fresh water out of the sea, the salt stays behind, which is why the sea is "
    "salty and rain is not. The same water has travelled this loop again and again for billions of years: the "
    "water in a glass today may once have been part of a cloud over another continent, a glacier, or the sea "
    "where the first living things appeared. Scientists measure how fast the cycle turns to understand droughts "
    "and floods, and to predict how a warmer climate, which lets the air hold more vapour, will change the rain."
)
SUMMARY_ASK = "Summarise this text in one sentence."


@lru_cache(maxsize=1)
def real_tokenizer():
    """SmolLM2's own tokenizer, from the converted folder (converted once, seconds); only ever read."""
    return AutoTokenizer.from_pretrained(real_model.real_model_folder())


def prompt_ids(tokenizer, index: int, length: int, shape_name: str) -> tuple[int, ...]:
    """Request `index`'s prompt: a question (short chat), or the first ~`length` tokens of the document and a
    request to summarise it (long document), in the tokenizer's chat template."""
    if shape_name == "long document":
        words = tokenizer.encode(DOCUMENT, add_special_tokens=False)[: max(16, length - 24)]
        content = f"{tokenizer.decode(words)}\n\n{SUMMARY_ASK}"
    else:
        content = QUESTIONS[index % len(QUESTIONS)]
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True
    )
    return tuple(tokenizer.encode(text, add_special_tokens=False))


def with_real_prompts(trace: Trace, tokenizer) -> Trace:
    """The same arrivals and reply lengths with real prompts: `prompt_ids` for each request."""
    requests = tuple(
        dataclasses.replace(r, prompt_ids=prompt_ids(tokenizer, r.index, r.prompt_tokens, trace.shape.name))
        for r in trace.requests
    )
    return dataclasses.replace(trace, requests=requests, prompt_source=SOURCE)


def question_of(tokenizer, request) -> str:
    """What the user asked, read back from the prompt: the last user turn, without the template's markers."""
    text = tokenizer.decode(request.prompt_ids, skip_special_tokens=True)
    return text.rsplit("user\n", 1)[-1].removesuffix("\n").removesuffix("assistant").strip()


def texts_table(tokenizer, trace: Trace, records) -> list[dict]:
    """One row per request: what it asked and what the engine answered (the reply as streamed)."""
    replies = {r.index: r.text for r in records}
    return [
        {"request": r.index, "asked": question_of(tokenizer, r), "reply": replies.get(r.index, "")}
        for r in trace.requests
    ]


@lru_cache(maxsize=1)
def _english_stream() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The document's sentences and the questions, one after another, as SmolLM2's token ids, and the index where
    each sentence starts: the source of `text_ids`."""
    sentences = [f"{part.strip().rstrip('.')}." for part in DOCUMENT.split(". ") if part.strip()] + list(QUESTIONS)
    stream, starts = [], []
    for sentence in sentences:
        starts.append(len(stream))
        stream += real_tokenizer().encode((" " if stream else "") + sentence, add_special_tokens=False)
    return tuple(stream), tuple(starts)


def text_ids(length: int, seed: int) -> list[int]:
    """`length` token ids of real English for a prompt of an exact length (the prefix-cache lesson's system prompts
    and turns): the document and the questions read from the start of a sentence `seed` picks, wrapping round.
    Different seeds start at different sentences, so two prompts share a prefix only where the lesson means them to."""
    stream, starts = _english_stream()
    start = starts[(seed * 7) % len(starts)]
    return [stream[(start + i) % len(stream)] for i in range(length)]


def opening(ids: list[int], words: int = 12) -> str:
    """The first words of a prompt made by `text_ids`, decoded, for a sentence under its table."""
    return " ".join(real_tokenizer().decode(ids[: words * 2]).split()[:words])
