"""Token text made safe to show: a model can write `<script>` as easily as any other text."""

from __future__ import annotations

import html


def escape(text: str) -> str:
    """Text for HTML (and Markdown rendered with HTML allowed): <, >, & and quotes become entities."""
    return html.escape(text, quote=True)
