"""Teacher text for SmolLM2's drafts: SmolLM2-135M-Instruct's own greedy replies to story requests (with `--mixed`,
general requests too), one JSON line each: {"request", "prompt_ids", "reply_ids", "stopped"}; never in the repository.

    python -m inference.training.teacher_text --batch 64 --out /tmp/draft/teacher.jsonl --minutes 20
    python -m inference.training.teacher_text --mixed --batch 64 --out /tmp/draft/mixed.jsonl --minutes 45

Why its own replies (sequence-level distillation, Kim & Rush 2016): greedy speculation keeps a drafted token when it is
the target's argmax, so a draft should learn the target's greedy text, not the stories' authors'. Requests come from
the TRAINING split only. transformers' float32 forward answers `--batch` requests a pass, left-padded (262 tokens/s
here, against ~85 from llama-server's slots, which made the first replies of the bundled drafts; 2026-12-04).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import zlib
from pathlib import Path

import torch

from inference.core import loader, real_model
from inference.core.measuring import now
from inference.core.paths import DEFAULT_CORPUS_DIR
from inference.training import corpus as corpus_io
from inference.training.train import TrainSettings

NAMED = re.compile(r"\b(?:a|an) ((?:[a-z]+ ){0,2}[a-z]+) named ([A-Z][a-z]+)")
FIRST_SENTENCE = re.compile(r"^(.{20,220}?[.!?])(?:\s|$)", re.S)
TEMPLATES = (
    "Continue this story: {first}",
    "Write a short story that begins with: {first}",
    "Tell me a bedtime story for a small child. Start like this: {first}",
    "Write a short story for children. The first sentence is: {first}",
)
NAMED_TEMPLATES = (
    "Write a short story about {who} named {name}.",
    "Tell me a short story for kids about {who} named {name}.",
    "Write a simple story for a three-year-old about {who} named {name}.",
)


def training_stories(corpus_dir: Path = DEFAULT_CORPUS_DIR) -> list[str]:
    """The training split of the corpus, exactly as `train.py` splits it (same fraction, same seed)."""
    settings = TrainSettings()
    stories = corpus_io.read_stories(corpus_dir)
    train, _validation = corpus_io.split_train_validation(stories, settings.validation_fraction, settings.seed)
    return train


def story_requests(stories: list[str], count: int, seed: int = 7) -> list[str]:
    """`count` distinct story requests, each made from one training story (its first sentence, or "a <who> named
    <name>" when it has one), in a seeded order."""
    rng = random.Random(seed)
    order = list(range(len(stories)))
    rng.shuffle(order)
    requests, seen = [], set()
    for i in order:
        story = " ".join(stories[i].split())
        named = NAMED.search(story[:300])
        first = FIRST_SENTENCE.match(story)
        if named and rng.random() < 0.4:
            who = named.group(1)
            article = "an" if who[0] in "aeiou" else "a"
            request = rng.choice(NAMED_TEMPLATES).format(who=f"{article} {who}", name=named.group(2))
        elif first:
            request = rng.choice(TEMPLATES).format(first=first.group(1))
        else:
            continue
        if request not in seen:
            seen.add(request)
            requests.append(request)
        if len(requests) == count:
            break
    return requests


# Requests outside stories, for the feature draft (`distill_features`): a topic in a request form. The topics of the
# requests the bench and the page measure on (the sky, the sea, cooking, France and capitals, arithmetic) are left
# out on purpose, so those stay unseen.
GENERAL_TOPICS = (
    "bees", "volcanoes", "the moon", "rainbows", "trees", "the human heart", "computers", "bread", "bicycles",
    "elephants", "snow", "the internet", "dinosaurs", "electricity", "music", "the desert", "honey", "airplanes",
    "glaciers", "sleep", "soap", "magnets", "the library", "friendship", "recycling", "coffee", "butterflies",
    "earthquakes", "chess", "the post office", "sharks", "clouds", "batteries", "gardening", "the piano", "owls",
    "forests", "bridges", "the telephone", "mushrooms", "penguins", "wind", "football", "the brain", "paper",
    "chocolate", "rivers", "camping", "trains", "the solar system", "bananas", "robots", "lightning", "museums",
    "kindness", "exercise", "spiders", "the calendar", "salt", "the microscope",
    # added for the second, larger teacher text (2026-12-04)
    "ants", "whales", "frogs", "horses", "wolves", "cats", "dogs", "tigers", "dolphins", "parrots", "snakes",
    "turtles", "octopuses", "bats", "coral reefs", "rain forests", "mountains", "caves", "islands", "lakes",
    "deserts at night", "the seasons", "autumn leaves", "storms", "fog", "tides", "stars", "comets", "mars",
    "jupiter", "gravity", "light", "sound", "heat", "magnifying glasses", "telescopes", "rockets", "satellites",
    "the wheel", "printing", "clocks", "maps", "compasses", "lighthouses", "ships", "cars", "buses", "elevators",
    "umbrellas", "shoes", "buttons", "glass", "plastic", "steel", "cotton", "wool", "rubber", "concrete",
    "water pipes", "bicycle helmets", "vaccines", "hospitals", "teeth", "bones", "muscles", "the lungs", "blood",
    "vitamins", "fruit", "vegetables", "rice", "cheese", "milk", "eggs", "apples", "potatoes", "tea", "pizza",
    "ice cream", "birthdays", "holidays", "school", "teachers", "homework", "reading", "writing letters", "poetry",
    "painting", "photography", "dancing", "theater", "movies", "video games", "board games", "puzzles", "kites",
    "swimming", "running", "basketball", "tennis", "the olympics", "teamwork", "patience", "honesty", "courage",
    "curiosity", "saving money", "banks", "markets", "farming", "fishing", "bakeries", "firefighters", "doctors",
    "pilots", "astronauts", "scientists", "inventors", "engineers", "architects", "libraries in small towns",
    "smartphones", "email", "passwords", "programming", "spreadsheets", "search engines", "solar panels",
    "wind turbines", "dams", "forest fires", "pollution", "climate change", "composting", "bird migration",
    "hibernation", "photosynthesis", "seeds", "flowers", "cactus plants", "bamboo", "ancient egypt",
    "the pyramids", "castles", "knights", "vikings", "pirates", "the roman empire", "writing systems", "languages",
)  # fmt: skip
GENERAL_TEMPLATES = (
    "Tell me about {t}.",
    "Explain {t} in simple words.",
    "Give three interesting facts about {t}.",
    "Why is {t} important?",
    "Write a short poem about {t}.",
    "Describe {t} to a ten-year-old.",
    "What are the pros and cons of {t}?",
    "Write a short story about {t}.",
    # added for the second, larger teacher text (2026-12-04): more questions, which SmolLM2 answers in prose
    "What should everyone know about {t}?",
    "Write a paragraph about {t}.",
    "What is the history of {t}?",
    "Answer briefly: what is special about {t}?",
    "List five things related to {t}.",
    "Write a short essay about {t}.",
    "Explain {t} to a beginner, step by step.",
    "What is a common question about {t}, and what is the answer?",
)


def general_requests(seed: int = 11) -> list[str]:
    """Every topic in every request form, in a seeded order that spreads topics and forms."""
    every = [form.format(t=topic) for topic in GENERAL_TOPICS for form in GENERAL_TEMPLATES]
    random.Random(seed).shuffle(every)
    return every


def mixed_requests(stories: list[str], count: int, seed: int = 23) -> list[str]:
    """General requests and story requests, alternating, `count` in all."""
    general, story = general_requests(), story_requests(stories, count, seed)
    mixed = [r for pair in zip(general, story) for r in pair] + general[len(story) :] + story[len(general) :]
    return mixed[:count]


def batched_greedy_replies(model, tokenizer, prompts: list[list[int]], max_tokens: int) -> list[tuple[list[int], bool]]:
    """transformers' greedy replies to a batch of prompts, left-padded with an attention mask: (reply ids up to and
    with the end token, whether it stopped there) for each."""
    pad, stop = tokenizer.pad_token_id, tokenizer.eos_token_id
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=max_tokens, do_sample=False, pad_token_id=pad,
            eos_token_id=stop,
        )  # fmt: skip
    rows = out[:, width:].tolist()
    return [(row[: row.index(stop) + 1], True) if stop in row else (row, False) for row in rows]


def read_replies(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def split_replies(rows: list[dict], every: int) -> tuple[list[dict], list[dict]]:
    """Whole requests held out by a hash of their text (one in `every`), so a file that grew since keeps its split."""
    held = [zlib.crc32(row["request"].encode()) % every == 0 for row in rows]
    return [r for r, h in zip(rows, held, strict=True) if not h], [r for r, h in zip(rows, held, strict=True) if h]


def described(path: Path, train_rows: list[dict], held_rows: list[dict]) -> dict:
    """The teacher text a draft was trained on, for its training_meta.json."""
    tokens = sum(len(r["reply_ids"]) for r in train_rows)
    return {"file": path.name, "replies_trained": len(train_rows), "replies_held_out": len(held_rows),
            "reply_tokens_trained": tokens}  # fmt: skip


def generate(out: Path, minutes: float, max_tokens: int, count: int, mixed: bool, batch: int) -> None:
    """Answer the requests not yet in `out` (a stopped run resumes), `batch` a pass, appending each reply as it
    comes, until `minutes` are up."""
    loaded = loader.load_model(real_model.REAL_MODEL_NAME)
    stories = training_stories()
    requests = mixed_requests(stories, count) if mixed else story_requests(stories, count)
    done = {row["request"] for row in read_replies(out)} if out.is_file() else set()
    todo = [r for r in requests if r not in done]
    print(f"{len(requests)} requests, {len(done)} already answered, {len(todo)} to ask", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    started, replies, tokens = now(), 0, 0
    with out.open("a") as f:
        for at in range(0, len(todo), batch):
            if now() > started + minutes * 60:
                break
            chunk = todo[at : at + batch]
            prompts = [loader.encode_prompt(loaded.tokenizer, r, chat=True) for r in chunk]
            answers = batched_greedy_replies(loaded.model, loaded.tokenizer, prompts, max_tokens)
            for request, prompt_ids, (reply_ids, stopped) in zip(chunk, prompts, answers, strict=True):
                row = {"request": request, "prompt_ids": prompt_ids, "reply_ids": reply_ids, "stopped": stopped}
                f.write(json.dumps(row) + "\n")
                replies, tokens = replies + 1, tokens + len(reply_ids)
            f.flush()
            print(f"{replies} replies, {tokens} tokens, {tokens / (now() - started):.1f} tokens/s", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/draft/teacher.jsonl"))
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--max-tokens", type=int, default=192)
    parser.add_argument("--count", type=int, default=4000, help="requests made (generation stops at --minutes)")
    parser.add_argument("--mixed", action="store_true", help="general requests beside the story requests")
    parser.add_argument("--batch", type=int, default=64, help="requests a pass")
    args = parser.parse_args(argv)
    generate(args.out, args.minutes, args.max_tokens, args.count, args.mixed, args.batch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
