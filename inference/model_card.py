"""Write MODEL_CARD.md for any model folder `inference.train` wrote, from its training_meta.json.

    python -m inference.model_card [FOLDER]        # default: the bundled dense model

The card is a list of sections chosen by the training preset (`SECTIONS`): each section is a
function (meta, context) -> Markdown, so a preset adds its own section by appending a function.
The samples are generated here with the project's engine, unedited: prompt "Once upon a time",
temperature 0.8, seeds 0, 1, ..., up to 200 new tokens.
"""
from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inference.engine import new_trace
from inference.evaluate import score_stream
from inference.loader import encode_prompt, load_model
from inference.paths import BUNDLED_MODEL_DIR, DEFAULT_HELDOUT_FILE, MODELS_DIR
from inference.sampling import SamplingSettings

SAMPLE_PROMPT = "Once upon a time"
SAMPLE_SETTINGS = SamplingSettings(temperature=0.8)
SAMPLE_TOKENS = 200
SAMPLE_COUNT = {"dense": 5, "draft": 2}  # presets not named here get 3
ARCHITECTURES = {"llama": "`LlamaForCausalLM` (RMSNorm, RoPE, SwiGLU MLP, tied input/output embeddings)"}


def samples(folder: Path, n: int = 5, max_new_tokens: int = SAMPLE_TOKENS) -> list[str]:
    loaded = load_model(str(folder.resolve()))
    out = []
    for seed in range(n):
        trace = new_trace(loaded.model, loaded.tokenizer, encode_prompt(loaded.tokenizer, SAMPLE_PROMPT), max_new_tokens, seed)
        list(trace.run(SAMPLE_SETTINGS))
        text = loaded.tokenizer.decode(trace.generated_ids, skip_special_tokens=True)
        ending = "" if trace.stop_reason == "eos" else f" […cut at {max_new_tokens} tokens]"
        out.append(SAMPLE_PROMPT + text + ending)
    return out


@dataclass(frozen=True)
class CardContext:
    """What a section may need besides training_meta.json."""

    name: str  # the folder's name
    stories: list[str]  # unedited samples


Section = Callable[[dict, CardContext], str]


def preset_of(meta: dict) -> str:
    return meta.get("preset", "dense")


# -- sections ------------------------------------------------------------------------------

def title_section(meta: dict, ctx: CardContext) -> str:
    intro = {
        "dense": "A small Llama-architecture language model trained from random initialisation by Inference\n"
                 "Lab's own code (`inference/train.py`), so the app has a real model that works offline.",
        "draft": "A tiny Llama-architecture model trained from random initialisation by Inference Lab's own code\n"
                 "(`inference/train.py`, preset `draft`) to be the **draft** of speculative decoding for the\n"
                 "bundled model: it uses that model's tokenizer, so every token id means the same in both, and is\n"
                 "much smaller, so guessing a token costs far less than a pass of the target.",
    }.get(preset_of(meta), f"A model trained by Inference Lab's own code (`inference/train.py`, preset `{preset_of(meta)}`).")
    return f"# {ctx.name}\n\n{intro}\n"


def architecture_section(meta: dict, ctx: CardContext) -> str:
    s, st = meta["settings"], meta["stats"]
    kind = ARCHITECTURES.get(s.get("architecture", "llama"), f"`{s.get('architecture')}`")
    if meta.get("tokenizer_from"):
        tokenizer = (f"the tokenizer of `{meta['tokenizer_from']}`, reused unchanged (vocabulary {s['vocab_size']:,}, "
                     "the same ids); `<|endoftext|>` (id 0) is BOS, EOS, story separator and padding")
    else:
        tokenizer = (f"byte-level BPE trained on the same training split, vocabulary {s['vocab_size']:,}; "
                     "`<|endoftext|>` (id 0) is BOS, EOS, story separator and padding")
    return f"""## Architecture
| | |
|---|---|
| type | {kind} |
| parameters | {st['parameters']:,} |
| layers | {s['num_layers']} |
| hidden size / intermediate size | {s['hidden_size']} / {s['intermediate_size']} (multiples of 128, so group-wise int4 covers every layer) |
| attention heads / KV heads | {s['num_heads']} / {s['num_kv_heads']} (grouped-query attention: the KV cache is {s['num_heads'] // s['num_kv_heads']}× smaller than with one KV head per head) |
| head dim | {s['hidden_size'] // s['num_heads']} |
| context | {s['context']} tokens |
| tokenizer | {tokenizer} |
| weights | `model.safetensors`, {s.get('save_dtype', 'float32')} |
"""


def training_section(meta: dict, ctx: CardContext) -> str:
    s, st = meta["settings"], meta["stats"]
    hours = st["wall_time_s"] / 3600
    defaults = ("defaults in `TrainSettings` reproduce this model" if preset_of(meta) == "dense"
                else f"the `{preset_of(meta)}` preset in `inference/train.py` reproduces this model")
    return f"""## Training
| | |
|---|---|
| corpus | `{meta['corpus']}`: {', '.join(meta['corpus_files'])} ({st['train_tokens_in_corpus']:,} training tokens after a {s['validation_fraction']:.0%} validation split of whole stories) |
| tokens seen | {st['tokens_seen']:,} ({st['tokens_seen'] / st['train_tokens_in_corpus']:.1f} passes over the training split) |
| steps × batch × length | {s['steps']:,} × {s['batch_size']} × {s['context']} |
| optimiser | AdamW (β 0.9/0.95, weight decay {s['weight_decay']}), peak LR {s['peak_lr']}, {s['warmup_steps']} warm-up steps, cosine decay to 10%, gradient clip 1.0, bf16 autocast: {s['bf16_autocast']} |
| wall time | {st['wall_time_s'] / 60:.0f} min ({hours:.2f} h) on 2 CPU cores, torch {meta['torch']} |
| seed | {s['seed']} (weight init, data order and validation split) |
| reproduce | `{meta['command']}` from the project root ({defaults}) |

The per-evaluation train/validation losses are in `training_log.csv` beside this card.
"""


def results_section(meta: dict, ctx: CardContext) -> str:
    s, st = meta["settings"], meta["stats"]
    return f"""## Results
Losses are per predicted token in nats, and in bits per UTF-8 byte (comparable across tokenizers).
Every token is scored once with at least 256 tokens of context where the text allows.

| split | nats/token | bits/byte |
|---|---|---|
| train (a sample of {s['validation_fraction']:.0%} of the training stories) | {st['train_nats_per_token']:.3f} | {st['train_bits_per_byte']:.3f} |
| validation (held back from the training folder) | {st['val_nats_per_token']:.3f} | {st['val_bits_per_byte']:.3f} |
| **held-out** (`shared/corpus/heldout/`, TinyStories V1 validation, never trained on) | {st.get('heldout_nats_per_token', float('nan')):.3f} | **{st.get('heldout_bits_per_byte', float('nan')):.3f}** |

The held-out file separates paragraphs and stories with blank lines and does not mark story
ends, unlike the training text; the score above is measured on the raw file as it is. With its
blank lines folded to single newlines (the training layout; bytes counted after folding) it is
{st['heldout_folded_bits_per_byte']:.3f} bits/byte.
"""


def quality_bar_section(meta: dict, ctx: CardContext) -> str:
    st = meta["stats"]
    return f"""**Quality bar.** The target was at most 0.85 bits/byte on the held-out stories; this model
reaches {st['heldout_bits_per_byte']:.3f} (raw file) and {st['val_bits_per_byte']:.3f} on validation stories. The limit is
data, not time: the training folder holds {st['train_tokens_in_corpus']:,} tokens, seen
{st['tokens_seen'] / st['train_tokens_in_corpus']:.1f} times, and the gap between train ({st['train_bits_per_byte']:.3f}) and validation
({st['val_bits_per_byte']:.3f}) shows it has begun to memorise. More TinyStories text (the full set
has about 470M tokens) is what would bring it under 0.85; a bigger model or longer run on
the same 6 MB would mostly widen the gap.
"""


def draft_role_section(meta: dict, ctx: CardContext) -> str:
    target_name = meta.get("tokenizer_from") or "the target"
    target_meta_file = MODELS_DIR / target_name / "training_meta.json"
    comparison = ""
    if target_meta_file.exists():
        target = json.loads(target_meta_file.read_text())["stats"]
        comparison = (
            f" It has {target['parameters'] / meta['stats']['parameters']:.1f}× fewer parameters than `{target_name}` "
            f"({target['parameters']:,}), and its held-out score is {meta['stats']['heldout_bits_per_byte']:.3f} bits/byte "
            f"against the target's {target['heldout_bits_per_byte']:.3f}: its own stories are worse, as expected."
        )
    return f"""**As a draft.** A draft is judged by how often the target accepts its guesses, not by its own
text: the Speculative decoding page (`/speculative`) and `python -m inference.bench` measure its
acceptance rate against `{target_name}` on this machine.{comparison}
"""


def samples_section(meta: dict, ctx: CardContext) -> str:
    sample_text = "\n\n".join(f"**Seed {i}.**\n\n> " + story.replace("\n", "\n> ") for i, story in enumerate(ctx.stories))
    count = {5: "Five", 2: "Two", 3: "Three"}.get(len(ctx.stories), str(len(ctx.stories)))
    return f"""## {count} unedited samples
Prompt "{SAMPLE_PROMPT}", temperature {SAMPLE_SETTINGS.temperature}, no other filter, seeds 0-{len(ctx.stories) - 1}, Inference Lab's engine.

{sample_text}
"""


def licence_section(meta: dict, ctx: CardContext) -> str:
    return """## Data and licence
Trained on TinyStories (Eldan & Li 2023, arXiv:2305.07759; Hugging Face dataset
`roneneldan/TinyStories`), licensed **CDLA-Sharing-1.0**. Under CDLA-Sharing-1.0 trained
weights are "Results" and are not bound by its sharing terms. The corpus itself is not part of
this repository. Intended use: teaching and demonstrating inference; the model writes simple
children's stories and knows little else.
"""


BASE_SECTIONS: list[Section] = [title_section, architecture_section, training_section, results_section]
SECTIONS: dict[str, list[Section]] = {
    "dense": [*BASE_SECTIONS, quality_bar_section, samples_section, licence_section],
    "draft": [*BASE_SECTIONS, draft_role_section, samples_section, licence_section],
}


def render(meta: dict, stories: list[str], name: str) -> str:
    """The card's Markdown: the preset's sections, in order, one blank line apart."""
    sections = SECTIONS.get(preset_of(meta), [*BASE_SECTIONS, samples_section, licence_section])
    ctx = CardContext(name=name, stories=stories)
    return "\n".join(section(meta, ctx) for section in sections)


def heldout_in_training_format(folder: Path, heldout: Path = DEFAULT_HELDOUT_FILE) -> float:
    """Bits per byte on the held-out text with its blank lines folded to single newlines
    (the training text's paragraph layout), bytes counted after folding. A second view of
    the held-out score that separates "the model" from "the file's layout"."""
    loaded = load_model(str(folder.resolve()))
    text = re.sub(r"\n\s*\n", "\n", heldout.read_text(encoding="utf-8"))
    ids = loaded.tokenizer(text)["input_ids"]
    return score_stream(loaded.model, ids, len(text.encode("utf-8"))).bits_per_byte


def write_card(folder: Path = BUNDLED_MODEL_DIR) -> Path:
    meta = json.loads((folder / "training_meta.json").read_text())
    meta["stats"]["heldout_folded_bits_per_byte"] = round(heldout_in_training_format(folder), 4)
    stories = samples(folder, SAMPLE_COUNT.get(preset_of(meta), 3))
    card = render(meta, stories, folder.name)
    path = folder / "MODEL_CARD.md"
    path.write_text(card)
    return path


if __name__ == "__main__":
    print(write_card(Path(sys.argv[1]) if len(sys.argv) > 1 else BUNDLED_MODEL_DIR))
