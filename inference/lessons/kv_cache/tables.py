"""The calculator's public-model numbers as three narrow tables, and the width of their model column, so that no
table is cut at the right edge at 800 px (one table of nine numbers was; four numbers beside the model column cut
"storyteller-llama-6m (this app)" to "storyteller-llama-6m (t")."""

from __future__ import annotations

from collections.abc import Iterable

# Three numbers a table at most: with the model column they fit the narrowest page.
TABLES = {
    "kv_calc_shapes": ["attention", "attention_heads", "kv_heads"],
    "kv_calc_table": ["kv_gb", "kv_gb_without_gqa", "gqa_saving"],
    "kv_calc_sizes": ["sliding_layers", "kv_per_token_mb", "weight_gb"],
}
NUMBER_COLUMN_PX = 75  # Streamlit's "small" column width
# The dataframe's width at 800 px with the sidebar open: 468 px, 456 px in presenter mode (measured in Chromium).
NARROWEST_TABLE_PX = 456
# Source Sans at 14 px, the dataframe's font: 178 px for the 31 characters of "storyteller-llama-6m (this app)"
# (canvas measureText in Chromium), about 5.7 px a character; a cell pads its text by about 8.5 px each side.
CHARACTER_PX = 6
CELL_PADDING_PX = 20
NARROWEST_MODEL_COLUMN_PX = 110


def model_column_width(names: Iterable[str]) -> int:
    """Pixels for the model column: room for the longest name, but never so wide that a table's three number
    columns are pushed past the edge of the narrowest page (a longer name is cut there)."""
    widest = max(NARROWEST_MODEL_COLUMN_PX, CELL_PADDING_PX + CHARACTER_PX * max((len(n) for n in names), default=0))
    most = NARROWEST_TABLE_PX - NUMBER_COLUMN_PX * max(len(columns) for columns in TABLES.values())
    return min(widest, most)
