"""The colours every chart and token chip uses, and their contrast: the one palette (Okabe and Ito's), the colours
named after what they mean (raw, final, chosen, removed, prefill, decode), the chips' scale by probability and
WCAG 2's contrast ratio; with the font and grid colours of every chart's base look.

`style` re-exports every name here, so a figure module imports its colours with its layout from one place.
"""

from __future__ import annotations

import numpy as np

FONT = dict(family="Inter, Segoe UI, sans-serif")
GRID_COLOUR = "#eeeeee"
ZERO_LINE_COLOUR = "#cccccc"

# The one palette, built on Okabe and Ito's eight colours (blue, orange, vermillion, sky blue, bluish green, yellow,
# reddish purple, black), which stay apart for the common colour-vision deficiencies and on a washed-out projector.
# Pages name their colours after what they mean (below), from these; where two meanings meet on one chart (kept,
# filtered, chosen) they also differ by a label, marker or pattern (STATUS_PATTERN), never by colour alone.
PALETTE = {
    "blue": "#0072B2",  # Okabe-Ito blue
    "orange": "#E69F00",  # Okabe-Ito orange
    "red": "#D55E00",  # Okabe-Ito vermillion
    "green": "#009E73",  # Okabe-Ito bluish green
    "purple": "#CC79A7",  # Okabe-Ito reddish purple
    "yellow": "#F0E442",  # Okabe-Ito yellow
    "pale_blue": "#a9cde6",  # Okabe-Ito blue, light: the raw distribution behind the final one
    "light_blue": "#8cc3ea",
    "blue_grey": "#9aa9bf",
    "sky": "#56B4E9",  # Okabe-Ito sky blue
    "dark_blue": "#005587",
    "navy": "#003f66",
    "lavender": "#e2b9d3",  # Okabe-Ito reddish purple, light
    "sand": "#f3d27a",
    "slate": "#7f8c8d",
    "light_grey": "#d9d9d9",
    "ink": "#333",
    "grey": "#666",
    "dark_grey": "#444",
}
# Small (fits easily) to none holds it: blue through yellow to vermillion, a scale that keeps its order in lightness
# and along the blue-yellow axis that deuteranopia and protanopia keep (the classic green-to-red one folds in two).
FIT_SCALE = ["#0072B2", "#56B4E9", "#a9dcf4", "#F0E442", "#E69F00", "#D55E00"]

# A next-token distribution, on every chart that shows one: each meaning's palette colour, and the words a caption
# names it by ("light blue bars = the model's raw probability"), made from the same key, so they never disagree.
DISTRIBUTION = {
    "raw": "pale_blue",  # the model's probability, T=1, no filters
    "final": "blue",  # after every setting: what the draw uses
    "chosen": "orange",  # the token drawn
    "removed": "light_grey",  # cut by a filter
    "cutoff": "red",  # the top-p line
}
COLOUR_WORDS = {meaning: key.replace("pale_", "light ").replace("_", " ") for meaning, key in DISTRIBUTION.items()}
RAW_COLOUR, FINAL_COLOUR, CHOSEN_COLOUR, REMOVED_COLOUR, CUTOFF_COLOUR = (PALETTE[k] for k in DISTRIBUTION.values())
# Kept, filtered and chosen bars differ by pattern too (Plotly's marker.pattern.shape), and by their labels.
STATUS_PATTERN = {"kept": "", "chosen": "", "removed": "/"}
STATUS_COLOUR = {"kept": FINAL_COLOUR, "chosen": CHOSEN_COLOUR, "removed": REMOVED_COLOUR}

# The two phases of a generation (Prefill vs decode, Cost).
PREFILL_COLOUR = PALETTE["blue"]
DECODE_COLOUR = PALETTE["orange"]

# Small grey text (captions, status lines, a chart's text, the keys line) at WCAG AA's 4.5:1 or more: 6.0:1 on white,
# 5.3:1 on the sidebar's #f0f2f6. Streamlit's own caption grey (#828180) is 3.9:1.
TEXT_GREY = "#5f6169"

# A chip's background by probability: pale orange (unlikely) through cream and light blue to Okabe-Ito's deep blue
# (near certain), a blue-orange scale that colour-blind readers see in the same order (the tooltip gives the number).
# It steps at 0.6 from a light blue under black text to a blue under white text: a smooth blend passes through
# blues where neither text colour reaches 4.5:1.
_CHIP_STOPS = (0.0, 0.2, 0.6, 0.6 + 1e-9, 1.0)
_CHIP_RGB = np.array([[248, 200, 160], [255, 244, 214], [140, 195, 234], [0, 114, 178], [0, 79, 124]])


def status_marker(statuses) -> dict:
    """A bar trace's `marker` for kept / chosen / removed bars (one status per bar): colour and pattern."""
    return {
        "color": [STATUS_COLOUR[s] for s in statuses],
        "pattern": {"shape": [STATUS_PATTERN[s] for s in statuses], "fgcolor": "#555", "size": 6},
    }


def probability_colour(p: float) -> str:
    """Chip colour for a probability: pale orange (unlikely) to deep blue (near certain)."""
    p = min(max(p, 0.0), 1.0)
    rgb = [np.interp(p, _CHIP_STOPS, _CHIP_RGB[:, channel]) for channel in range(3)]
    return "#" + "".join(f"{int(round(c)):02x}" for c in rgb)


def relative_luminance(colour: str) -> float:
    """WCAG 2's relative luminance of a #rrggbb colour."""
    channels = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of two #rrggbb colours (1 to 21; small text needs 4.5 for AA)."""
    la, lb = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def probability_text_colour(p: float) -> str:
    """Text on a `probability_colour` background: white or near-black, whichever contrasts more."""
    background = probability_colour(p)
    return "#ffffff" if contrast_ratio(background, "#ffffff") > contrast_ratio(background, "#111111") else "#111111"
