"""Formats (JSON schema, regex, a list of choices) compiled against a tokenizer by llguidance: each step its matcher
gives the token ids that can continue the format (a packed bitmask) and advances by the one chosen. Wrapping a
tokenizer (~0.1 s) and compiling a format (~1 ms) are cached; each run copies the pristine matcher. JSON whitespace
follows llama.cpp's `space` rule, so both engines allow the same texts and a model cannot fill its budget with
newlines."""

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
    """A format that cannot be used (or a run it cannot finish), in one sentence."""


@dataclass(frozen=True)
class Format:
    """One output format; `spec` is what a visitor typed: a JSON schema, a regex, or choices one per line."""

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
        return _parse_schema(self.spec)

    def grammar(self) -> str:
        """llguidance's Lark grammar, forcing off: every token spelling forced text is allowed, as in llama.cpp."""
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
        """The oracle, independent of llguidance: jsonschema, `re.fullmatch`, or one of the choices."""
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
        return compiled(tokenizer, vocab_size, self).matcher.deep_copy()

    def compile_ms(self, tokenizer, vocab_size: int) -> float:
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
    wrapped = library_tokenizer(tokenizer, vocab_size)
    with Stopwatch() as watch:
        matcher = llguidance.LLMatcher(wrapped, fmt.grammar(), log_level=0)
    if matcher.is_error():
        raise FormatError(library_error_sentence(fmt, matcher.get_error()))
    return Compiled(matcher, watch.ms)


def library_error_sentence(fmt: Format, error: str) -> str:
    """llguidance's error (a report of many lines) as one sentence."""
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
# A model not trained here on stories (a pretrained assistant) gets facts a class can check.
GENERAL_PROMPTS = {
    "JSON: a name and an age": (
        "Marie Curie was born in 1867 and died in 1934, aged 66. Her name and her age at her death, as JSON:"
    ),
    "Choice: yes or no": "Is Paris the capital of France? Answer yes or no. Answer:",
    "Regex: a date": "People first walked on the Moon on 20 July 1969. Written as YYYY-MM-DD, that date is",
}


def preset_prompt(preset: str, kind: str) -> str:
    return PRESETS[preset][1] if kind == STORY else GENERAL_PROMPTS[preset]
