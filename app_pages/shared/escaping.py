"""Token text made safe to show: a model can write `<script>` as easily as any other text."""

import html


def escape(text: str) -> str:
    return html.escape(text, quote=True)
