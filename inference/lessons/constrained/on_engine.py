"""The same format on llama.cpp's server, greedy: its `json_schema` (converted to a GBNF grammar by
llama.cpp itself) or a GBNF `grammar` for a list of choices, and the server's own timings.

A regex has no llama.cpp request field of its own (only a JSON string's `pattern`, which adds the
quotes), so regex formats are not sent. Both engines use the same token ids (the GGUF carries the
bundled tokenizer) and pick the most likely allowed token, so the texts agree unless two allowed
tokens tie or the two grammars allow different texts: llama.cpp's converter allows its `space` only in some
places (not after a string with a maxLength), llguidance's JSON between any two tokens (its whitespace set to
llama.cpp's `space` rule). The request goes only to a server this process started
(`inference.engines.llamacpp.serve`), never to an address a visitor typed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from inference.engines.client import LLAMACPP, EngineClient
from inference.lessons.constrained.formats import CHOICES, JSON_SCHEMA, Format

TIMEOUT_S = 120.0


@dataclass(frozen=True)
class EngineText:
    token_ids: list[int]
    text: str
    predicted_ms: float | None  # the server's own time for the generated tokens (grammar included)
    prompt_ms: float | None
    stop_type: str

    def without_eos(self, eos_ids) -> list[int]:
        """The generated ids without the end-of-text token llama-server returns last (our text leaves it out)."""
        ids = self.token_ids
        return ids[:-1] if ids and ids[-1] in eos_ids else ids


def llama_cpp_request(fmt: Format) -> dict | None:
    """The llama-server request fields for this format; None where llama.cpp has none (a regex)."""
    if fmt.kind == JSON_SCHEMA:
        return {"json_schema": fmt.schema}
    if fmt.kind == CHOICES:
        return {"grammar": "root ::= " + " | ".join(json.dumps(c) for c in fmt.choice_list)}
    return None


def engine_greedy(server_url: str, prompt_ids: list[int], fmt: Format, max_tokens: int) -> EngineText:
    """llama-server's greedy completion of `prompt_ids` under the format, stopping at end-of-text like our run."""
    fields = llama_cpp_request(fmt)
    if fields is None:
        raise ValueError("llama.cpp's server takes a JSON schema or a grammar, not a bare regex")
    with EngineClient(server_url, LLAMACPP, timeout=TIMEOUT_S) as client:
        done = client.complete(prompt_ids, max_tokens, ignore_eos=False, fields=fields)  # stops at end-of-text
    return EngineText(done.token_ids, done.text, done.timings.predicted_ms, done.timings.prompt_ms, done.stop_reason)
