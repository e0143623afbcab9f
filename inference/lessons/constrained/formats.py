"""Formats (JSON schema, regex, a list of choices) compiled against a tokenizer by llguidance.

llguidance (pinned in requirements.txt) turns a format into a grammar and a grammar plus a
tokenizer into a matcher: at each step the matcher gives the set of token ids that can continue
a text the format allows (a packed bitmask, one bit per token), and it advances by the token
chosen. Wrapping a tokenizer costs ~0.1 s and compiling a format ~1 ms on the bundled one, so
both are done once per (tokenizer, format) and cached; a run gets its own copy of the pristine
matcher (`Format.matcher`), so runs never share a matcher's state.

JSON whitespace follows llama.cpp's json-schema-to-grammar (`space ::= | " " | "\\n"{1,2}
[ \\t]{0,20}`) instead of llguidance's default (any run of whitespace), so the two engines allow
the same texts and a model cannot fill its budget with newlines inside an object.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache

import jsonschema
import llguidance
import llguidance.hf

from inference.core.measuring import Stopwatch
from inference.core.prompting import STORY

JSON_SCHEMA, REGEX, CHOICES = "json_schema", "regex", "choices"
KINDS = (JSON_SCHEMA, REGEX, CHOICES)
LLAMA_CPP_SPACE = r"( |\n{1,2}[ \t]{0,20})?"
NO_FORCING = '%llguidance {"no_forcing": true}'  # allow every spelling of forced text (see Format.grammar)


class FormatError(ValueError):
    """A format that cannot be used (or a run it cannot finish): the message is one sentence."""


@dataclass(frozen=True)
class Format:
    """One output format. `spec` is the text a visitor typed: a JSON schema, a regex, or the
    choices one per line."""

    kind: str
    spec: str

    def __post_init__(self):
        if self.kind not in KINDS:
            raise FormatError(f"The format kind has to be one of {', '.join(KINDS)}, not {self.kind!r}.")

    @property
    def choice_list(self) -> list[str]:
        return [line for line in self.spec.splitlines() if line.strip()]

    @property
    def schema(self) -> dict:
        """The parsed JSON schema (JSON formats only)."""
        return _parse_schema(self.spec)

    def grammar(self) -> str:
        """llguidance's grammar for this format (not yet checked against a tokenizer), a Lark grammar with
        forcing off: where the format forces text (a key, a closing quote) every token that spells it is
        allowed, as in llama.cpp's grammars, not only the tokenizer's own tokenization of it."""
        if self.kind == JSON_SCHEMA:
            schema = {**self.schema, "x-guidance": {"whitespace_pattern": LLAMA_CPP_SPACE}}
            body = "%json " + json.dumps(schema)
        elif self.kind == REGEX:
            if not self.spec:
                raise FormatError("The regex is empty: type a pattern such as \\d{4}-\\d{2}-\\d{2}.")
            try:
                body = "/" + llguidance.regex_to_lark(self.spec) + "/"
            except ValueError as error:
                raise FormatError(library_error_sentence(self, str(error))) from None
        else:
            options = self.choice_list
            if not options:
                raise FormatError("The list of choices is empty: type one choice per line.")
            body = " | ".join(json.dumps(option) for option in options)
        return llguidance.LLMatcher.grammar_from_lark(f"{NO_FORCING}\nstart: {body}")

    def matches(self, text: str) -> bool:
        """The oracle, independent of llguidance: the schema validates (jsonschema), the regex
        matches the whole text (Python's `re.fullmatch`), or the text is one of the choices."""
        if self.kind == CHOICES:
            return text in self.choice_list
        if self.kind == REGEX:
            return re.fullmatch(self.spec, text) is not None
        try:
            jsonschema.validate(json.loads(text), self.schema)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True

    def matcher(self, tokenizer, vocab_size: int) -> llguidance.LLMatcher:
        """A fresh matcher for one run, copied from the one compiled (once) for this tokenizer."""
        return compiled(tokenizer, vocab_size, self).matcher.deep_copy()

    def compile_ms(self, tokenizer, vocab_size: int) -> float:
        """How long compiling this format against the tokenizer took, the one time it was done."""
        return compiled(tokenizer, vocab_size, self).compile_ms


def _parse_schema(spec: str) -> dict:
    try:
        schema = json.loads(spec)
    except json.JSONDecodeError as error:
        raise FormatError(
            f"The schema is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}."
        ) from None
    if not isinstance(schema, dict):
        raise FormatError('The schema has to be a JSON object, such as {"type": "object"}.')
    return schema


@lru_cache(maxsize=8)
def library_tokenizer(tokenizer, vocab_size: int) -> llguidance.LLTokenizer:
    """llguidance's view of this tokenizer over the model's `vocab_size` output rows (once per tokenizer)."""
    try:
        return llguidance.hf.from_tokenizer(tokenizer, n_vocab=vocab_size)
    except ValueError as error:  # a slow (non-Rust) tokenizer: llguidance reads fast ones only
        raise FormatError(f"llguidance cannot read this model's tokenizer: {error}.") from None


@dataclass(frozen=True)
class Compiled:
    matcher: llguidance.LLMatcher  # pristine: never stepped, only copied
    compile_ms: float  # measured: grammar and matcher built (the tokenizer wrapped before, apart)


@lru_cache(maxsize=64)
def compiled(tokenizer, vocab_size: int, fmt: Format) -> Compiled:
    """The format compiled for this tokenizer, once per (tokenizer, format)."""
    wrapped = library_tokenizer(tokenizer, vocab_size)
    with Stopwatch() as watch:
        matcher = llguidance.LLMatcher(wrapped, fmt.grammar(), log_level=0)
    if matcher.is_error():
        raise FormatError(library_error_sentence(fmt, matcher.get_error()))
    return Compiled(matcher, watch.ms)


def library_error_sentence(fmt: Format, error: str) -> str:
    """llguidance's error (a parser report of many lines) as one sentence naming what is wrong."""
    lines = [line.strip() for line in error.splitlines() if line.strip()]
    reason = next((line[len("error:") :].strip() for line in lines if line.startswith("error:")), None)
    if reason is None:
        first = lines[0] if lines else "unknown error"
        reason = re.sub(r"^at \d+\(\d+\): ", "", first)
        reason = re.sub(r" in regex /.*$", "", reason)
    what = {JSON_SCHEMA: "schema", REGEX: "regex", CHOICES: "list of choices"}[fmt.kind]
    return f"The {what} cannot be used: {reason.rstrip('.')}."


# The page's presets: a JSON object with a name and an age, a yes/no choice, a date regex.
PERSON_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PRESETS = {
    "JSON: a name and an age": (
        Format(JSON_SCHEMA, json.dumps(PERSON_SCHEMA, indent=2)),
        'Lily was a little girl. Her friend asked her: "Who are you?" She wrote it down as JSON:',
    ),
    "Choice: yes or no": (Format(CHOICES, "yes\nno"), "Tom asked his mom if he could play outside. She said"),
    "Regex: a date": (
        Format(REGEX, r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"),
        "The letter from grandma was dated",
    ),
}
# The presets' prompts above are for a model trained here on stories; a model not trained here (a pretrained
# assistant) gets facts a class can check.
GENERAL_PROMPTS = {
    "JSON: a name and an age": (
        "Marie Curie was born in 1867 and died in 1934, aged 66. Her name and her age at her death, as JSON:"
    ),
    "Choice: yes or no": "Is Paris the capital of France? Answer yes or no. Answer:",
    "Regex: a date": "People first walked on the Moon on 20 July 1969. Written as YYYY-MM-DD, that date is",
}


def preset_prompt(preset: str, kind: str) -> str:
    """A preset's prompt for a model of this kind (`inference.core.prompting.model_kind`)."""
    return PRESETS[preset][1] if kind == STORY else GENERAL_PROMPTS[preset]
