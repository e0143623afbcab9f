"""The same format on llama.cpp's server, greedy: its `json_schema` (converted to GBNF by llama.cpp itself) or a GBNF
`grammar` for a list of choices; a bare regex has no request field of its own, so it is not sent. Both engines use the
same token ids and pick the most likely allowed token, so the texts agree unless the two grammars allow different
whitespace (llama.cpp's `space` only in some places, llguidance's between any two tokens). The request goes only to a
server this process started, never to an address a visitor typed."""

from __future__ import annotations

import json

from inference.engines.client import LLAMACPP, Completion, EngineClient
from inference.lessons.constrained.formats import CHOICES, JSON_SCHEMA, Format

TIMEOUT_S = 120.0


def llama_cpp_request(fmt: Format) -> dict | None:
    """The llama-server request fields for this format; None where llama.cpp has none (a regex)."""
    if fmt.kind == JSON_SCHEMA:
        return {"json_schema": fmt.schema}
    if fmt.kind == CHOICES:
        return {"grammar": "root ::= " + " | ".join(json.dumps(c) for c in fmt.choice_list)}
    return None


def engine_greedy(server_url: str, prompt_ids: list[int], fmt: Format, max_tokens: int) -> Completion:
    """llama-server's greedy completion under the format, stopping at end-of-text like our run."""
    fields = llama_cpp_request(fmt)
    if fields is None:
        raise ValueError("llama.cpp's server takes a JSON schema or a grammar, not a bare regex")
    with EngineClient(server_url, LLAMACPP, timeout=TIMEOUT_S) as client:
        return client.complete(prompt_ids, max_tokens, ignore_eos=False, fields=fields)
