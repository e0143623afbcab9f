"""What a class store is (the interface and its records); `store` picks one of its two implementations.

Where a class lives: a store every app process opens, SQLite on one machine, PostgreSQL for several.

A class is a row (its code, the hash of the teacher's secret, the state the teacher last published, which
step is open for guesses), its members (a random id each, a name only if the teacher turned names on) and
their guesses (one per member and step: answering again replaces the answer, so nothing is counted twice).

`open_store(location)` picks the implementation from `INFERENCE_LAB_CLASS_DB`: a `postgresql://` URL opens
`store_postgres.PostgresClassStore` (psycopg 3; app processes on several machines share it), anything else is a
file path for `store_sqlite.SqliteClassStore` (WAL mode: every process on one machine shares the file, no
server). Both run the same SQL (`store_sql.SqlClassStore`) and pass the same tests (tests/test_class_store.py);
the schema is created on first use and versioned (`store_sql.MIGRATIONS`).

Security: the teacher's secret never leaves the teacher's session (the link carries the code alone) and only
its SHA-256 is stored; every teacher operation checks it here, server side, so a student cannot drive the
run by crafting a request. Codes are drawn by `secrets` from 31**8 (about 8.5 x 10**11) values: not enumerable.
"""

from __future__ import annotations

import hashlib
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass

# No 0/O or 1/I/L: a code read off a projector is typed without guessing.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
SOMETHING_ELSE = -1  # a guess outside the top 10 the students were offered
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class ClassError(ValueError):
    """A class operation that cannot be done, with one sentence saying why."""


@dataclass(frozen=True)
class ClassInfo:
    code: str
    names_on: bool
    state: dict | None  # what the teacher last published (see classroom.session.published_state)
    version: int  # increases with every publish: followers redraw only when it changes
    guess_step: str | None  # the step open for guesses, or None
    members: int
    updated: float


@dataclass(frozen=True)
class Tally:
    """The class's answers for one step: how many picked each option, and their stated probabilities."""

    step: str
    counts: dict[int, int]  # token id (or SOMETHING_ELSE) -> answers
    stated_probs: dict[int, list[float]]  # token id -> the probabilities students gave, where they gave one
    names: dict[int, list[str]]  # token id -> names, only when the teacher turned names on
    answers: int


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def normalise_code(text: str) -> str:
    return "".join(ch for ch in str(text).upper() if ch.isalnum())


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def is_postgres_url(location: str) -> bool:
    return str(location).startswith(POSTGRES_SCHEMES)


class ClassStore(ABC):
    """What a class needs from its storage; `store_sql.SqlClassStore` implements it once for SQLite and PostgreSQL.

    `teacher_key`: an optional second credential for the teacher, the browser's own random key (the sticky cookie
    deploy/nginx.conf sets), so that after the teacher's app host dies the same browser, reconnected to another
    host, can take the class up again (`resume.take_up`); only its SHA-256 is stored, like the secret's.
    `checkpoint`: what another host needs to rebuild the teacher's run (`run_checkpoint.checkpoint`), stored beside the
    published state and never sent to followers."""

    @abstractmethod
    def create(self, names_on: bool = False, teacher_key: str | None = None) -> tuple[str, str]:
        """A new class: (code, teacher secret)."""

    @abstractmethod
    def info(self, code: str) -> ClassInfo: ...

    @abstractmethod
    def publish(self, code: str, secret: str, state: dict, checkpoint: dict | None = None) -> int: ...

    @abstractmethod
    def open_guess(self, code: str, secret: str, step: str | None) -> None: ...

    @abstractmethod
    def join(self, code: str, name: str = "") -> str: ...

    @abstractmethod
    def answer(self, code: str, member: str, step: str, token_id: int, stated_prob: float | None = None) -> None: ...

    @abstractmethod
    def tally(self, code: str, step: str) -> Tally: ...

    @abstractmethod
    def end(self, code: str, secret: str) -> None: ...

    @abstractmethod
    def taught_by(self, teacher_key: str) -> tuple[str, dict | None] | None:
        """The live class this browser key teaches (the latest), with its checkpoint; None if none."""
