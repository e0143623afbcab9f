"""Will a public model's weights fit on one accelerator, keeping a stated runtime reserve free?

A card's memory (what nvidia-smi reports) is not all the model's: the CUDA context and the framework take a few
hundred MB once a program starts (assets/accelerators.json), and a forward pass needs room for its activations
and the kernels' workspaces. A model whose weights fill the card to its last byte does not run. So the
Quantization page takes RUNTIME_RESERVE_BYTES off every card before asking what holds the weights, and says so;
what is left after the weights and the reserve is the room for the KV cache.

    fit = reserved_fit_table(load_public_models(), load_accelerators())
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from inference.core.calculator import DEFAULT_BITS, GB, Accelerator, cards_needed, fit_table, smallest_card

RUNTIME_RESERVE_BYTES = 1 * GB  # an assumption, stated on the page: not a measurement of any one framework
RUNTIME_RESERVE_WHAT = "the CUDA context, activations and the kernels' workspaces"


def after_reserve(cards: Sequence[Accelerator], reserve_bytes: int = RUNTIME_RESERVE_BYTES) -> list[Accelerator]:
    """The cards with `reserve_bytes` taken off each one's memory: what weights and KV cache may use."""
    if reserve_bytes < 0:
        raise ValueError(f"`reserve_bytes` has to be 0 or more, but is {reserve_bytes}")
    too_small = [card.label for card in cards if card.usable_bytes <= reserve_bytes]
    if too_small:
        raise ValueError(f"a reserve of {reserve_bytes / GB:g} GB leaves nothing on {', '.join(too_small)}")
    return [replace(card, usable_bytes=card.usable_bytes - reserve_bytes) for card in cards]


def reserved_fit_table(
    models: Sequence[Mapping[str, Any]],
    cards: Sequence[Accelerator],
    bits_list: Sequence[float] = DEFAULT_BITS,
    reserve_bytes: int = RUNTIME_RESERVE_BYTES,
) -> pd.DataFrame:
    """`calculator.fit_table` on the cards after the reserve: `left_gb` is what remains for the KV cache."""
    return fit_table(models, bits_list, after_reserve(cards, reserve_bytes))


def smallest_card_after_reserve(
    n_bytes: int, cards: Sequence[Accelerator], reserve_bytes: int = RUNTIME_RESERVE_BYTES
) -> tuple[Accelerator | None, int]:
    """The calculator's answer under the same rule as the table: the smallest card that holds `n_bytes` of
    weights beside the reserve (its memory already reduced by the reserve, or None), and how many of the largest
    card the weights need when none does."""
    reduced = after_reserve(cards, reserve_bytes)
    return smallest_card(n_bytes, reduced), cards_needed(n_bytes, reduced[-1])
