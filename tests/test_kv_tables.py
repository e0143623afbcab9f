"""The KV calculator's public-model tables fit the narrowest page: at most three numbers beside the model column,
which is wide enough for every public model's name and each bundled model's "(this app)" name (at 800 px four
numbers beside a 140 px column cut "storyteller-llama-6m (this app)")."""

import pytest

from inference.core.bundled import bundled_models
from inference.core.calculator import kv_table, load_public_models
from inference.lessons.kv_cache.tables import (
    CELL_PADDING_PX,
    CHARACTER_PX,
    NARROWEST_TABLE_PX,
    NUMBER_COLUMN_PX,
    TABLES,
    model_column_width,
)

pytestmark = pytest.mark.unit


def names_on_the_page() -> list[str]:
    return [e["name"] for e in load_public_models()] + [f"{m.name} (this app)" for m in bundled_models()]


def test_every_model_name_the_page_can_show_fits_its_column():
    names = names_on_the_page()
    assert any(name.startswith("storyteller-llama-6m") for name in names)
    width = model_column_width(names)
    assert all(CELL_PADDING_PX + CHARACTER_PX * len(name) <= width for name in names)


def test_the_numbers_beside_the_model_column_fit_the_narrowest_page():
    assert all(len(columns) <= 3 for columns in TABLES.values())
    for names in (names_on_the_page(), ["x" * 80]):  # a long hub id is cut, the numbers stay on the page
        widest_table = model_column_width(names) + NUMBER_COLUMN_PX * max(len(c) for c in TABLES.values())
        assert widest_table <= NARROWEST_TABLE_PX


def test_the_tables_show_every_number_of_the_calculator_once():
    shown = [column for columns in TABLES.values() for column in columns]
    computed = kv_table(load_public_models()[:2], 1024, 1, "bfloat16").columns
    assert len(shown) == len(set(shown))
    assert set(shown) == set(computed) - {"model", "exceeds_context", "notes"}
