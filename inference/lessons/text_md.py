"""A lesson's sentences kept as Markdown: each `## key` heading, then one format string (its lines joined)."""

import re
from pathlib import Path


def read_text_md(path: Path) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", Path(path).read_text(), flags=re.M)[1:]
    return {key.strip(): " ".join(body.split()) for key, body in zip(parts[::2], parts[1::2])}
