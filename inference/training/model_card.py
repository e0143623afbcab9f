"""Write MODEL_CARD.md for any model folder `inference.training.train` wrote, from its training_meta.json.

    python -m inference.training.model_card [FOLDER]        # default: the bundled dense model

The card is a list of sections chosen by the training preset (`SECTIONS`): each section is a
function (meta, context) -> Markdown, so a preset adds its own section by appending a function.
The samples are generated here with the project's engine, unedited: prompt "Once upon a time",
temperature 0.8, seeds 0, 1, ..., up to 200 new tokens.
"""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inference.core import routing
from inference.core.loader import encode_prompt, load_model
from inference.core.paths import BUNDLED_MODEL_DIR, DEFAULT_HELDOUT_FILE, MODELS_DIR
from inference.core.run import STOP_EOS, new_trace
from inference.core.wording import signed
from inference.sampling.pipeline import SamplingSettings
from inference.training import token_frequency
from inference.training.evaluate import score_stream

SAMPLE_PROMPT = "Once upon a time"
SAMPLE_SETTINGS = SamplingSettings(temperature=0.8)
SAMPLE_TOKENS = 200
SAMPLE_COUNT = {"dense": 5, "draft": 2}  # presets not named here get 3
ARCHITECTURES = {
    "llama": "`LlamaForCausalLM` (RMSNorm, RoPE, SwiGLU MLP, tied input/output embeddings)",
    "mixtral": "`MixtralForCausalLM` (the dense model's RMSNorm, RoPE attention and tied embeddings; each MLP "
    "replaced by a router and a set of SwiGLU experts, see below)",
}


def samples(folder: Path, n: int = 5, max_new_tokens: int = SAMPLE_TOKENS) -> list[str]:
    loaded = load_model(str(folder.resolve()))
    out = []
    for seed in range(n):
        trace = new_trace(
            loaded.model, loaded.tokenizer, encode_prompt(loaded.tokenizer, SAMPLE_PROMPT), max_new_tokens, seed
        )
        list(trace.run(SAMPLE_SETTINGS))
        text = loaded.tokenizer.decode(trace.generated_ids, skip_special_tokens=True)
        ending = "" if trace.stop_reason == STOP_EOS else f" […cut at {max_new_tokens} tokens]"
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
        "Lab's own code (`inference/training/train.py`), so the app has a real model that works offline.",
        "draft": "A tiny Llama-architecture model trained from random initialisation by Inference Lab's own code\n"
        "(`inference/training/train.py`, preset `draft`) to be the **draft** of speculative decoding for the\n"
        "bundled model: it uses that model's tokenizer, so every token id means the same in both, and is\n"
        "much smaller, so guessing a token costs far less than a pass of the target.",
        "moe": "A small **Mixture-of-Experts** language model trained from random initialisation by Inference Lab's\n"
        "own code (`inference/training/train.py`, preset `moe`) on the same stories and the same number of tokens as\n"
        "the bundled dense model, so the app can show which experts real tokens use.",
    }.get(
        preset_of(meta),
        f"A model trained by Inference Lab's own code (`inference/training/train.py`, preset `{preset_of(meta)}`).",
    )
    return f"# {ctx.name}\n\n{intro}\n"


def architecture_section(meta: dict, ctx: CardContext) -> str:
    s, st = meta["settings"], meta["stats"]
    kind = ARCHITECTURES.get(s.get("architecture", "llama"), f"`{s.get('architecture')}`")
    if meta.get("tokenizer_from"):
        tokenizer = (
            f"the tokenizer of `{meta['tokenizer_from']}`, reused unchanged (vocabulary {s['vocab_size']:,}, "
            "the same ids); `<|endoftext|>` (id 0) is BOS, EOS, story separator and padding"
        )
    else:
        tokenizer = (
            f"byte-level BPE trained on the same training split, vocabulary {s['vocab_size']:,}; "
            "`<|endoftext|>` (id 0) is BOS, EOS, story separator and padding"
        )
    return f"""## Architecture
| | |
|---|---|
| type | {kind} |
| parameters | {st["parameters"]:,} |
| layers | {s["num_layers"]} |
| hidden size / intermediate size | {s["hidden_size"]} / {s["intermediate_size"]} (multiples of 128, so group-wise int4 covers every layer) |
| attention heads / KV heads | {s["num_heads"]} / {s["num_kv_heads"]} (grouped-query attention: the KV cache is {s["num_heads"] // s["num_kv_heads"]}× smaller than with one KV head per head) |
| head dim | {s["hidden_size"] // s["num_heads"]} |
| context | {s["context"]} tokens |
| tokenizer | {tokenizer} |
| weights | `model.safetensors`, {s.get("save_dtype", "float32")} |
"""


def training_section(meta: dict, ctx: CardContext) -> str:
    s, st = meta["settings"], meta["stats"]
    hours = st["wall_time_s"] / 3600
    defaults = (
        "defaults in `TrainSettings` reproduce this model"
        if preset_of(meta) == "dense"
        else f"the `{preset_of(meta)}` preset in `inference/training/train.py` reproduces this model"
    )
    if meta.get("distillation"):
        defaults += ", then the distillation below"
    return f"""## Training
| | |
|---|---|
| corpus | `{meta["corpus"]}`: {", ".join(meta["corpus_files"])} ({st["train_tokens_in_corpus"]:,} training tokens after a {s["validation_fraction"]:.0%} validation split of whole stories) |
| tokens seen | {st["tokens_seen"]:,} ({st["tokens_seen"] / st["train_tokens_in_corpus"]:.1f} passes over the training split) |
| steps × batch × length | {s["steps"]:,} × {s["batch_size"]} × {s["context"]} |
| optimiser | AdamW (β 0.9/0.95, weight decay {s["weight_decay"]}), peak LR {s["peak_lr"]}, {s["warmup_steps"]} warm-up steps, cosine decay to 10%, gradient clip 1.0, bf16 autocast: {s["bf16_autocast"]} |
| wall time | {st["wall_time_s"] / 60:.0f} min ({hours:.2f} h) on 2 CPU cores, torch {meta["torch"]} |
| seed | {s["seed"]} (weight init, data order and validation split) |
| reproduce | `{meta["command"]}` from the project root ({defaults}) |

The per-evaluation train/validation losses are in `training_log.csv` beside this card.
"""


def results_section(meta: dict, ctx: CardContext) -> str:
    s, st = meta["settings"], meta["stats"]
    return f"""## Results
Losses are per predicted token in nats, and in bits per UTF-8 byte (comparable across tokenizers).
Every token is scored once with at least 256 tokens of context where the text allows.

| split | nats/token | bits/byte |
|---|---|---|
| train (a sample of {s["validation_fraction"]:.0%} of the training stories) | {st["train_nats_per_token"]:.3f} | {st["train_bits_per_byte"]:.3f} |
| validation (held back from the training folder) | {st["val_nats_per_token"]:.3f} | {st["val_bits_per_byte"]:.3f} |
| **held-out** (`shared/corpus/heldout/`, TinyStories V1 validation, never trained on) | {st.get("heldout_nats_per_token", float("nan")):.3f} | **{st.get("heldout_bits_per_byte", float("nan")):.3f}** |

The held-out file separates paragraphs and stories with blank lines and does not mark story
ends, unlike the training text; the score above is measured on the raw file as it is. With its
blank lines folded to single newlines (the training layout; bytes counted after folding) it is
{st["heldout_folded_bits_per_byte"]:.3f} bits/byte.
"""


def quality_bar_section(meta: dict, ctx: CardContext) -> str:
    st = meta["stats"]
    return f"""**Quality bar.** The target was at most 0.85 bits/byte on the held-out stories; this model
reaches {st["heldout_bits_per_byte"]:.3f} (raw file) and {st["val_bits_per_byte"]:.3f} on validation stories. The limit is
data, not time: the training folder holds {st["train_tokens_in_corpus"]:,} tokens, seen
{st["tokens_seen"] / st["train_tokens_in_corpus"]:.1f} times, and the gap between train ({st["train_bits_per_byte"]:.3f}) and validation
({st["val_bits_per_byte"]:.3f}) shows it has begun to memorise. More TinyStories text (the full set
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
acceptance rate against `{target_name}` on this machine.{comparison}{shortlist_note(MODELS_DIR / ctx.name)}
"""


def distillation_section(meta: dict, ctx: CardContext) -> str:
    """How the draft was distilled from its target after its own training (`inference/training/distill.py`), with its
    agreement with the target before and after, as the distiller measured it ("" for a model never distilled)."""
    d = meta.get("distillation")
    if not d:
        return ""
    s, before, after = d["settings"], d["before"], d["after"]

    def row(name: str, key: str, percent: bool = True) -> str:
        shown = (lambda v: f"{v:.1%}") if percent else (lambda v: f"{v:.3f}")
        return f"| {name} | {shown(before[key])} | **{shown(after[key])}** |"

    return f"""## Distilled from `{d["teacher"]}`
After the training above, `python -m inference.training.distill` taught this draft its target's whole next-token
distribution: the loss is the KL divergence KL(p ‖ q) from the target's softmax p to the draft's q over all
{meta["settings"]["vocab_size"]:,} tokens at every position (knowledge distillation; for drafts, DistillSpec, Zhou et
al. 2023), on windows of the same training split, starting from the draft's own weights. Why: speculative sampling
keeps a drafted token with probability min(1, p/q), so a draft's acceptance rate is Σ min(p, q), one minus the
distance between q and p, and text-only training teaches q the text, not p.

| | |
|---|---|
| steps × batch × length | {s["steps"]:,} × {s["batch_size"]} × {s["context"]} ({d["tokens_seen"]:,} tokens) |
| optimiser | AdamW, peak LR {s["peak_lr"]}, {s["warmup_steps"]} warm-up steps, linear decay to 10%, bf16 autocast: {s["bf16_autocast"]} |
| wall time | {d["wall_time_s"] / 60:.0f} min on 2 CPU cores, torch {d["torch"]} |
| reproduce | `{d["command"]}` |

Measured on the validation stories ({after["positions"]:,} positions of stored text, each model reading the same
text; the Speculative page measures acceptance on text the models write, which differs):

| | before | after |
|---|---|---|
{row("same top token as the target (greedy acceptance)", "greedy_agreement")}
{row("Σ min(p, q) at temperature 1 (sampled acceptance)", "acceptance_t1")}
{row("Σ min(p, q) at temperature 0.8", "acceptance_t0.8")}
{row("its own loss, nats/token", "val_nats_per_token", percent=False)}

Every evaluation is in `distillation_log.csv` beside this card. The results above are the distilled draft's.
"""


def shortlist_note(folder: Path, sizes=(512, 1024, 2048)) -> str:
    """What the draft's token counts are for, with what share of its training text a few shortlists cover, computed
    from them ("" without counts)."""
    counts = token_frequency.token_counts(folder)
    if counts is None:
        return ""
    shares = " / ".join(f"{token_frequency.coverage(counts, size):.1%}" for size in sizes)
    return (
        f"\n\n**Its shortlist.** `token_frequency.json` counts every token of its training split "
        f"(`python -m inference.training.token_frequency`), so the Speculative page can have it score only its most "
        f"frequent tokens, as FR-Spec does: its {' / '.join(f'{size:,}' for size in sizes)} most frequent tokens are "
        f"{shares} of that text."
    )


def samples_section(meta: dict, ctx: CardContext) -> str:
    sample_text = "\n\n".join(
        f"**Seed {i}.**\n\n> " + story.replace("\n", "\n> ") for i, story in enumerate(ctx.stories)
    )
    count = {5: "Five", 2: "Two", 3: "Three"}.get(len(ctx.stories), str(len(ctx.stories)))
    return f"""## {count} unedited samples
Prompt "{SAMPLE_PROMPT}", temperature {SAMPLE_SETTINGS.temperature}, no other filter, seeds 0-{len(ctx.stories) - 1}, Inference Lab's engine.

{sample_text}
"""


def _read_log(folder: Path) -> list[dict]:
    path = folder / "training_log.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def moe_card_inputs(folder: Path) -> dict:
    """What the MoE section reads besides training_meta.json: routing_stats.json (written by
    `python -m inference.training.moe_stats`), the trainer's expert load log, and the dense model's
    meta and log (the model whose tokenizer it reuses)."""
    stats = routing.read_stats(folder)
    if stats is None:
        raise FileNotFoundError(
            f"{folder / routing.STATS_FILE} is missing: run python -m inference.training.moe_stats {folder}"
        )
    meta = json.loads((folder / "training_meta.json").read_text())
    dense_folder = MODELS_DIR / (meta.get("tokenizer_from") or BUNDLED_MODEL_DIR.name)
    return {
        "stats": stats,
        "load_log": routing.read_load_log(folder) or [],
        "log": _read_log(folder),
        "dense_name": dense_folder.name,
        "dense": json.loads((dense_folder / "training_meta.json").read_text()),
        "dense_log": _read_log(dense_folder),
    }


def _ms(timed: dict, name: str) -> str:
    return f"{timed[name]:.2f}" if name in timed else "–"


def _idle(row: dict, below: float = 0.01) -> int:
    return sum(f < below for layer in row["fractions"] for f in layer)


def _spread(fractions: list[float]) -> str:
    return f"{min(fractions):.1%} – {max(fractions):.1%}"


def moe_section(meta: dict, ctx: CardContext) -> str:
    """Why this layout, total vs active size, quality next to the dense model, expert load early
    and late, what the token identity says about the expert, and the two routing experiments."""
    m, s, st = meta["moe"], meta["settings"], meta["stats"]
    stats, dense, dense_name = m["stats"], m["dense"]["stats"], m["dense_name"]
    shape, source, budget = stats["shape"], stats["source"], stats["budget"]
    E, k, layers = shape["experts"], shape["k"], shape["layers"]
    moe_b, dense_b = budget["moe"], budget["dense"]
    uniform = 1 / E

    gap_moe = st["val_bits_per_byte"] - st["train_bits_per_byte"]
    gap_dense = dense["val_bits_per_byte"] - dense["train_bits_per_byte"]
    held_diff = st["heldout_bits_per_byte"] - dense["heldout_bits_per_byte"]
    verdict = (
        f"**{abs(held_diff):.3f} bits/byte better** than"
        if held_diff < 0
        else f"**{held_diff:.3f} bits/byte worse** than"
        if held_diff > 0
        else "the same as"
    )
    memorises = (
        "it memorises more (its train score improved further than its validation score did)"
        if gap_moe > gap_dense
        else "it does not memorise more than the dense model did"
    )
    quality_rows = "\n".join(
        f"| {name} | {p:,} | {a:,} | {q['train_bits_per_byte']:.3f} | {q['val_bits_per_byte']:.3f} | "
        f"**{q['heldout_bits_per_byte']:.3f}** | {q['val_bits_per_byte'] - q['train_bits_per_byte']:+.3f} |"
        for name, p, a, q in [
            (ctx.name, moe_b["total_parameters"], moe_b["active_parameters"], st),
            (dense_name, dense_b["total_parameters"], dense_b["active_parameters"], dense),
        ]
    )

    final = stats["load"]["fractions"]
    load_rows = "\n".join(
        f"| {layer} | " + " | ".join(f"{f:.1%}" for f in row) + f" | {_spread(row)} |"
        for layer, row in enumerate(final)
    )
    log = m["load_log"]
    if log:
        early, late = log[0], log[-1]
        early_worst = max(max(r) for r in early["fractions"])
        late_worst = max(max(r) for r in late["fractions"])
        early_line = (
            f"The trainer logged the same shares on the first 8,192 validation tokens at every evaluation "
            f"(`expert_load_log.json`). At step {early['step']:,} the busiest expert of any layer took "
            f"{early_worst:.1%} of the picks; at step {late['step']:,}, {late_worst:.1%} (uniform: {uniform:.1%}). "
            "Per layer, lowest – highest share: "
            + "; ".join(
                f"layer {i} {_spread(a)} → {_spread(b)}"
                for i, (a, b) in enumerate(zip(early["fractions"], late["fractions"]))
            )
            + f". Experts with under 1% of their layer's picks: {_idle(early)} of {layers * E} at step "
            f"{early['step']:,}, {_idle(late)} at step {late['step']:,}"
            + (
                ": at this coefficient the balance loss did not bring them back, so their parameters are held but "
                "almost never used."
                if _idle(late)
                else "."
            )
            + " No model was trained without the balance loss or with a stronger one, so what it prevented or "
            "could have done is not measured here."
        )
    else:
        early_line = "No load log from training was kept, so the early balance cannot be shown."

    info_rows = "\n".join(
        f"| {i} | {row['expert_entropy_bits']:.2f} | {row['mutual_information_bits']:.2f} |"
        for i, row in enumerate(stats["information"])
    )

    base = stats["experiments"][0]["val_bits_per_byte"]
    scoring = source.get("scoring", "windows of 512 tokens")
    last_eval = (
        f"; the trainer's last evaluation, float32 weights: {float(m['log'][-1]['val_bits_per_byte']):.4f}"
        if m["log"]
        else ""
    )
    ms = stats["decode_ms_per_token"]
    experiment_rows = "\n".join(
        f"| {e['name']} | {e['k']} | {e['val_bits_per_byte']:.4f} | {e['val_bits_per_byte'] - base:+.4f} | "
        f"{_ms(ms, e['name'])} |"
        for e in stats["experiments"]
    )
    off = [e for e in stats["experiments"] if e["off"]]
    off_line = ""
    if off:
        worst = max(off, key=lambda e: e["val_bits_per_byte"])
        mildest = min(off, key=lambda e: e["val_bits_per_byte"])
        off_line = (
            f" Switching one expert off (the same index in every layer; its tokens go to their next choices) "
            f"costs from {signed(mildest['val_bits_per_byte'] - base, 4)} ({mildest['name']}) to "
            f"{signed(worst['val_bits_per_byte'] - base, 4)} bits/byte ({worst['name']})."
        )
    top1 = next((e for e in stats["experiments"] if e["name"] == "top-1"), None)
    top1_line = (
        f" Routing each token to its first expert only (top-1, weight 1) costs "
        f"{signed(top1['val_bits_per_byte'] - base, 4)} bits/byte."
        if top1
        else ""
    )

    dense_log = {row["step"]: row for row in m["dense_log"]}
    log_rows = "\n".join(
        f"| {int(row['step']):,} | {int(row['tokens_seen']):,} | {float(row['val_bits_per_byte']):.3f} | "
        + (f"{float(dense_log[row['step']]['val_bits_per_byte']):.3f}" if row["step"] in dense_log else "–")
        + " |"
        for row in m["log"]
    )

    return f"""## Mixture of Experts
**Why the Mixtral layout.** `MixtralForCausalLM` is part of transformers: plain
`AutoModelForCausalLM.from_pretrained` loads it from safetensors with no project code and no
`trust_remote_code`. Its attention (RoPE, grouped-query, the same KV cache), norms and tied
embeddings are the dense Llama's, so the only difference from `{dense_name}` is the MLP, and
everything the app says about attention and the KV cache holds for both. (The engine's lean
decode step is written for Llama's MLP; for this model the engine uses transformers' forward.)

| | |
|---|---|
| experts per layer / per token | {E} / {k} (top-{k}: the router's softmax, the {k} largest kept and renormalised to sum to 1) |
| expert width | {s["intermediate_size"]} (the dense MLP's {m["dense"]["settings"]["intermediate_size"]} / {k}: a token's MLP work equals the dense model's) |
| router | one linear layer [{E} × {s["hidden_size"]}] per layer |
| load-balancing loss | coefficient {s["router_aux_loss_coef"]} (the Switch Transformer / Mixtral auxiliary loss), added to the training loss |
| parameters, total / active per token | {moe_b["total_parameters"]:,} / {moe_b["active_parameters"]:,} (dense: {dense_b["total_parameters"]:,}); counted from the tensors |
| weights held / read per decoded token | {moe_b["bytes_held"] / 1e6:.1f} MB / {moe_b["bytes_read_per_token"] / 1e6:.1f} MB in float32 as the app loads them (dense: {dense_b["bytes_held"] / 1e6:.1f} / {dense_b["bytes_read_per_token"] / 1e6:.1f} MB); the file is bfloat16, half that |

### Quality next to the dense model (the same {st["tokens_seen"]:,} tokens seen)
| model | parameters | active | train bits/byte | validation | held-out | validation − train |
|---|---|---|---|---|---|---|
{quality_rows}

On the held-out file the MoE is {verdict} the dense model, with {moe_b["total_parameters"] / dense_b["total_parameters"]:.1f}×
its parameters and {moe_b["active_parameters"] / dense_b["active_parameters"]:.2f}× its active ones. The gap between validation and train
is {signed(gap_moe, 3)} bits/byte against the dense model's {signed(gap_dense, 3)}: {memorises}. With only
{st["train_tokens_in_corpus"]:,} training tokens (about 6 MB of text, seen {st["tokens_seen"] / st["train_tokens_in_corpus"]:.1f} times) a bigger model has
more room to memorise; these are the measured figures, not a tuned comparison. (The trainer scored
the float32 weights before rounding them to bfloat16 for the file. Scored in {scoring}, the
stored weights reach {base:.4f} on validation, first row
of the experiments below{last_eval}.)

### Expert load on validation stories
Share of the (token, slot) picks each expert received, over {source["tokens"]:,} tokens of
{source["stories"]:,} validation stories (each token makes {k} picks per layer); uniform is {uniform:.1%}.
Computed exactly by `inference.training.moe_stats`; per-expert top tokens are in `routing_stats.json`.

| layer | {" | ".join(f"e{e}" for e in range(E))} | lowest – highest |
|---|{"---|" * E}---|
{load_rows}

{early_line}

### What the experts learned
How much the token's identity says about its first-choice expert, per layer (plug-in estimate
over the same tokens: rare tokens make it read high, so it is an upper bound). Where it is far
below the choice's entropy, the same token goes to different experts in different contexts:
no clean one-expert-per-word specialisation.

| layer | entropy of the first choice (bits) | explained by the token (bits) |
|---|---|---|
{info_rows}

### Experiments, measured
Validation bits/byte on the same stories, scored as in the quality section, the model's stored weights, each variant built on
the same tensors (`inference.core.routing.variant`). Decode time: {stats["timing"]["how"]};
{stats["timing"]["machine"]}; {stats["timing"]["conditions"]}. Dense `{dense_name}` on the
same path: {ms.get("dense", float("nan")):.2f} ms per token (its validation score here: {stats["dense"]["val_bits_per_byte"]:.4f}).

| routing | experts per token | validation bits/byte | change | decode ms/token |
|---|---|---|---|---|
{experiment_rows}
{top1_line}{off_line}

### Training log
Validation bits/byte at each evaluation (windows of {s["context"]} tokens, no overlap), next to
the dense model's at the same step; all rows in `training_log.csv`.

| step | tokens seen | MoE | dense |
|---|---|---|---|
{log_rows}
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
    "draft": [*BASE_SECTIONS, distillation_section, draft_role_section, samples_section, licence_section],
    "moe": [*BASE_SECTIONS, moe_section, samples_section, licence_section],
}


def render(meta: dict, stories: list[str], name: str) -> str:
    """The card's Markdown: the preset's sections, in order, one blank line apart."""
    sections = SECTIONS.get(preset_of(meta), [*BASE_SECTIONS, samples_section, licence_section])
    ctx = CardContext(name=name, stories=stories)
    return "\n".join(text for text in (section(meta, ctx) for section in sections) if text)


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
    if preset_of(meta) == "moe":
        meta["moe"] = moe_card_inputs(folder)
    stories = samples(folder, SAMPLE_COUNT.get(preset_of(meta), 3))
    card = render(meta, stories, folder.name)
    path = folder / "MODEL_CARD.md"
    path.write_text(card)
    return path


if __name__ == "__main__":
    print(write_card(Path(sys.argv[1]) if len(sys.argv) > 1 else BUNDLED_MODEL_DIR))
