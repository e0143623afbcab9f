"""The Quantization page's sentences about memory: the rule of its will-it-fit chart and calculator, and the KV
cache's number types beside the weights' (split from `text`, which holds the sentences about the torch copies)."""

from inference.core.calculator import GB

KV_TYPES_SUMMARY = "The KV cache has a number type too: bytes per token of f32, f16, q8_0 and q4_0 keys and values"


def fit_rule(reserve_gb: float, reserve_what: str) -> str:
    """The rule the fit chart and the calculator both use, said once above them."""
    return (
        "Weight memory is parameters × bits ÷ 8. Halving the bits halves the memory, which decides whether a model "
        f"fits on one accelerator at all. A card is not all the model's: **{reserve_gb:g} GB of every card is kept "
        f"for {reserve_what}** (an assumption, stated here, not measured), and a model fits a card only if its "
        "weights fit in what remains. What is left after that is the room for the KV cache."
    )


def fit_caption(labels: list[str], overhead_fraction: float | None, group_size: int, reserve_gb: float) -> str:
    """The fit heatmap's caption; `overhead_fraction`: what the int4 copy stores beyond its integers (None before
    the comparison is measured)."""
    if overhead_fraction is None:
        return fit_caption(labels, 0.0, group_size, reserve_gb).split(" Scales and zero points")[0] + (
            f" Scales and zero points are not counted here (one bf16 scale and zero per group of {group_size} in the "
            "int4 copy: the comparison above measures what they add)."
        )
    return (
        "Parameter counts from the models' published configs (assets/public_models.json); GB = 10⁹ "
        "bytes. **Every parameter counted at the width shown**, embeddings included; the copies above keep "
        "embeddings and norms in bf16 instead. Each cell: weight GB → the smallest of "
        f"{', '.join(labels)} that holds it beside the {reserve_gb:g} GB runtime reserve, by the memory nvidia-smi "
        f"reports for that card (assets/accelerators.json); what is then left for the KV cache is in each cell's hover and the table below; "
        f"red = none, so N of the {labels[-1]}. "
        "Scales and zero points are not counted here: the int4 copy above stores "
        f"{overhead_fraction:.2%} more than its integers for them (one bf16 scale and zero per group of "
        f"{group_size})."
    )


def fit_sentence(fit) -> str:
    """The fit chart as one sentence with its key numbers (`calculator.fit_table`'s rows): per width, how many of the
    models fit one card, and what the largest model needs at the widest and the narrowest width."""
    widths = sorted(fit["bits"].unique(), reverse=True)
    models = fit["model"].nunique()
    fitting = ", ".join(f"{int(fit[fit['bits'] == b]['fits_on'].notna().sum())} at {b:g} bits" for b in widths)
    largest = fit.loc[fit["parameters"].idxmax(), "model"]

    def needs(bits) -> str:
        row = fit[(fit["model"] == largest) & (fit["bits"] == bits)].iloc[0]
        where = row["fits_on"] if isinstance(row["fits_on"], str) else f"{row['largest_needed']} × {row['largest']}"
        return f"{row['weight_gb']:,.0f} GB at {bits:g} bits ({where})"

    return (
        f"Of {models} models, those whose weights fit one card: {fitting}. The largest, {largest}, has "
        f"{needs(widths[0])} and {needs(widths[-1])}."
    )


FITS_HELP = (
    "The smallest card that holds these weights beside the runtime reserve, and the GB it has left for the KV cache."
)


def fits(card, needed_bytes: int, cards_needed: int, largest_label: str) -> str:
    """The calculator's answer: the smallest card that holds the weights (`needed_bytes`) beside the runtime reserve
    (named in the rule above the calculator) and what is left for the KV cache, or how many of the largest card they
    need (`card` None). Short: a metric's delta is cut at about 30 characters at 800 px."""
    if card is not None:
        return f"{card.label}, {(card.usable_bytes - needed_bytes) / GB:,.1f} GB left"
    return f"needs {cards_needed} × {largest_label}"


KV_TYPES_INTRO = (
    "The weights are not the only numbers an engine can store in fewer bits. Every token in the context leaves a "
    "key and a value row in every layer, the **KV cache**, and llama-server stores them in a type of its own "
    "(`-ctk` for keys, `-ctv` for values), in the same kind of blocks as the GGUF weights above: q8_0 keeps 32 "
    "numbers as 32 int8 and one f16 scale, q4_0 as 32 four-bit numbers and one scale. The weights are paid once; "
    "the cache is paid per token, per sequence."
)


def kv_types_caption(model_name: str, layers: int, kv_width: int, context: int) -> str:
    return (
        f"Bytes computed exactly for {model_name}: {layers} layers × a key row and a value row of {kv_width} numbers "
        "per token, in each type's blocks (f32 4 bytes a number, f16 2, q8_0 34 bytes per 32, q4_0 18 per 32; "
        f"the Inside the engine lesson's formula, checked there against what llama-server allocates); full context = "
        f"{context:,} tokens of one sequence."
    )


def kv_measured_caption(positions: int, text_what: str) -> str:
    return (
        "KL, top-1 agreement and decode speed measured on llama-server with the bundled model's float32 weights, "
        f"against an f32 cache, over {positions:,} positions of {text_what} (q8_0 and q4_0 with flash attention on, "
        "which a quantized V cache needs; f16 too). The same result as on the Inside the engine page."
    )
