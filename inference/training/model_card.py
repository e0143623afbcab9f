"""Fill the tables of numbers in a model card from the files beside it.

    python -m inference.training.model_card [FOLDER ...]      # default: every card under assets/models

A card (`MODEL_CARD.md`) is Markdown written by hand. Each table of numbers sits between `<!-- numbers:NAME -->` and
`<!-- /numbers -->`, and this script rewrites it from the folder's own files: `results` from training_meta.json's
scores, `distillation` from its "distillation" entry (`python -m inference.training.train --teacher`), `speculation` from
speculation.json (`python -m inference.bench.real_spec --write-draft`, with `--feature` for the feature draft).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from inference.core.paths import MODELS_DIR

BLOCK = re.compile(r"(<!-- numbers:(\w+) -->\n).*?(<!-- /numbers -->)", re.S)
SPLITS = {
    "train (a sample of the training stories as large as the validation split)": "train",
    "validation (held back from the training folder)": "val",
    "**held-out** (`shared/corpus/heldout/`, TinyStories V1 validation, never trained on)": "heldout",
}
AGREEMENT = {
    "same top token as the target (greedy acceptance)": ("greedy_agreement", "{:.1%}"),
    "Σ min(p, q) at temperature 1 (sampled acceptance)": ("acceptance_t1", "{:.1%}"),
    "Σ min(p, q) at temperature 0.8": ("acceptance_t0.8", "{:.1%}"),
    "its own loss, nats/token": ("val_nats_per_token", "{:.3f}"),
}
SPECULATION = (
    "| request | greedy acceptance | speed-up vs plain | c (a draft pass ÷ a target pass) | tokens | same tokens |"
)


def results(meta: dict, folder: Path) -> list[str]:
    st = meta["stats"]
    rows = [
        f"| {label} | {st[f'{k}_nats_per_token']:.3f} | {st[f'{k}_bits_per_byte']:.3f} |" for label, k in SPLITS.items()
    ]
    return ["| split | nats/token | bits/byte |", "|---|---|---|", *rows]


def distillation(meta: dict, folder: Path) -> list[str]:
    d = meta["distillation"]
    rows = [
        f"| {label} | {fmt.format(d['before'][k])} | **{fmt.format(d['after'][k])}** |"
        for label, (k, fmt) in AGREEMENT.items()
    ]
    return ["| | before | after |", "|---|---|---|", *rows]


def speculation(meta: dict, folder: Path) -> list[str]:
    m = json.loads((folder / "speculation.json").read_text())
    measured = [("story request", m["story"]), ("question", m["question"])]
    measured += [(f'"{o["request"]}"', o) for o in m.get("others", [])]
    rows = [
        f"| {label} | {r['acceptance_rate']:.1%} | {r['speedup_vs_plain']:.2f}× | {r['draft_cost_ratio']:.3f} | "
        f"{r['tokens']} | {'yes' if r['identical'] else 'NO'} |"
        for label, r in measured
    ]
    shortlist = f", the draft scoring its {m['shortlist']:,} most frequent tokens" if m.get("shortlist") else ""
    note = f"γ {m['gamma']}{shortlist}, {m['cpu']}, torch threads {m.get('torch_threads', '?')}"
    return [SPECULATION, "|---|---|---|---|---|---|", *rows, "", note]


TABLES = {"results": results, "distillation": distillation, "speculation": speculation}


def fill(folder: Path) -> Path:
    """Rewrite every table of numbers in `folder`'s MODEL_CARD.md; the prose around them is left as it is."""
    card = folder / "MODEL_CARD.md"
    meta = json.loads((folder / "training_meta.json").read_text())
    text = BLOCK.sub(lambda m: m[1] + "\n".join(TABLES[m[2]](meta, folder)) + "\n" + m[3], card.read_text())
    card.write_text(text)
    return card


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    for folder in parser.parse_args().folders or sorted(p.parent for p in MODELS_DIR.glob("*/MODEL_CARD.md")):
        print(fill(folder))
