"""The Quantization page's table columns as plain data: each column's dataframe format ("text" for a text column)
and its hover help, which the page turns into Streamlit's column configs."""

from inference.lessons import glossary

COST = {
    "weight bytes": (
        "localized",
        "Summed from the real tensors, quantized parts (integers, scales, zero points) included",
    ),
    "size vs float32": ("%.2f×", None),
    "time to quantize": ("text", "Time to copy and convert; float32 is the loaded model itself"),
    "decode tokens/s": ("%.0f", None),
    "speed vs float32": ("%.2f×", "Median of the rounds' ratios"),
    "range over rounds": ("text", "Smallest and largest ratio of a single round"),
}

QUALITY = {
    "mean KL from float32 (nats)": (
        "%.1e",
        "Average over the steps of KL(float32 ‖ this precision): how far this copy's next-token distribution is from "
        f"float32's (0 means identical). {glossary.help_for('nats')}",
    ),
    "top-1 agreement": ("percent", "Share of steps where the most likely token is float32's"),
    "mean p(float32's token)": ("percent", "Average probability this precision gives the token float32 chose"),
    "own greedy text departs at": (
        "text",
        "First step where this precision's own greedy text (section 2) differs from float32's",
    ),
}


def plain(formats: dict[str, str]) -> dict[str, tuple[str, None]]:
    """Formats without help, in the same shape."""
    return {column: (f, None) for column, f in formats.items()}
