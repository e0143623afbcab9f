"""Where a class lives: one small SQLite file shared by every app process on this machine.

A class is a row (its code, the hash of the teacher's secret, the state the teacher last published, which
step is open for guesses), its members (a random id each, a name only if the teacher turned names on) and
their guesses (one per member and step: answering again replaces the answer, so nothing is counted twice).

Why SQLite: the class set-up (docs/CLASSROOM.md, deploy/) runs several Streamlit processes behind nginx on one machine; a student's
process is often not the teacher's, so the class must live outside any one process. SQLite in WAL mode lets
every process read while one writes, needs no server, and survives a process restart. For app processes on
several machines, `ClassStore` is the interface to implement over a networked store: Redis (a hash per class,
a hash per step's guesses with HSET so an answer replaces the last one, EXPIRE for the idle timeout) is what
we would use; this project runs on one machine and does not ship one.

Security: the teacher's secret never leaves the teacher's session (the link carries the code alone) and only
its SHA-256 is stored; every teacher operation checks it here, server side, so a student cannot drive the
run by crafting a request. Codes are drawn by `secrets` from 31**8 (about 8.5 x 10**11) values: not enumerable.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

# No 0/O or 1/I/L: a code read off a projector is typed without guessing.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
SOMETHING_ELSE = -1  # a guess outside the top 10 the students were offered


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


class ClassStore(ABC):
    """What a class needs from its storage; `SqliteClassStore` is the one this project ships."""

    @abstractmethod
    def create(self, names_on: bool = False) -> tuple[str, str]:
        """A new class: (code, teacher secret)."""

    @abstractmethod
    def info(self, code: str) -> ClassInfo: ...

    @abstractmethod
    def publish(self, code: str, secret: str, state: dict) -> int: ...

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


SCHEMA = """
CREATE TABLE IF NOT EXISTS classes (
    code TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, names_on INTEGER NOT NULL,
    state TEXT, version INTEGER NOT NULL DEFAULT 0, guess_step TEXT,
    created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS members (
    code TEXT NOT NULL, member TEXT NOT NULL, name TEXT NOT NULL, joined REAL NOT NULL,
    PRIMARY KEY (code, member));
CREATE TABLE IF NOT EXISTS guesses (
    code TEXT NOT NULL, step TEXT NOT NULL, member TEXT NOT NULL, token_id INTEGER NOT NULL,
    stated_prob REAL, at REAL NOT NULL, PRIMARY KEY (code, step, member));
"""


class SqliteClassStore(ClassStore):
    """Classes in one SQLite file (WAL mode): every app process on the machine opens the same file.

    A class untouched for `idle_seconds` is gone (its rows deleted on the next operation that meets it);
    at most `max_members` students join one class.
    """

    def __init__(self, path: str | Path, idle_seconds: float = 2 * 3600, max_members: int = 60, clock=time.time):
        self.path = str(path)
        self.idle_seconds = idle_seconds
        self.max_members = max_members
        self.clock = clock
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)

    def _connect(self) -> _Closing:
        # One connection per operation: Streamlit runs each session in its own thread, and a sqlite3
        # connection must not cross threads. busy_timeout makes a writer wait for another process's write.
        db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        db.execute("PRAGMA busy_timeout=5000")
        return _Closing(db)

    # -- reading ----------------------------------------------------------------------------
    def _row(self, db, code: str):
        code = normalise_code(code)
        row = db.execute(
            "SELECT code, secret_hash, names_on, state, version, guess_step, updated FROM classes WHERE code=?",
            (code,),
        ).fetchone()
        if row is None:
            raise ClassError(f"There is no class with the code {code or '(empty)'}: check the code or the link.")
        if self.clock() - row[6] > self.idle_seconds:
            self._delete(db, code)
            raise ClassError(
                f"Class {code} has ended: nobody used it for {self.idle_seconds / 60:.0f} minutes. "
                "Ask the teacher for a new code."
            )
        return row

    def info(self, code: str) -> ClassInfo:
        with self._connect() as db:
            row = self._row(db, code)
            members = db.execute("SELECT COUNT(*) FROM members WHERE code=?", (row[0],)).fetchone()[0]
        state = json.loads(row[3]) if row[3] else None
        return ClassInfo(row[0], bool(row[2]), state, row[4], row[5], members, row[6])

    def tally(self, code: str, step: str) -> Tally:
        with self._connect() as db:
            row = self._row(db, code)
            rows = db.execute(
                "SELECT g.token_id, g.stated_prob, m.name FROM guesses g JOIN members m "
                "ON m.code=g.code AND m.member=g.member WHERE g.code=? AND g.step=?",
                (row[0], step),
            ).fetchall()
        counts, probs, names = {}, {}, {}
        for token_id, stated, name in rows:
            counts[token_id] = counts.get(token_id, 0) + 1
            if stated is not None:
                probs.setdefault(token_id, []).append(stated)
            if row[2] and name:
                names.setdefault(token_id, []).append(name)
        return Tally(step, counts, probs, names, len(rows))

    # -- the teacher --------------------------------------------------------------------------
    def create(self, names_on: bool = False) -> tuple[str, str]:
        secret = secrets.token_urlsafe(24)
        now = self.clock()
        with self._connect() as db:
            self._sweep(db)
            for _ in range(10):  # a clash among 8.5e11 codes is unlikely; never reuse a live one
                code = new_code()
                try:
                    db.execute(
                        "INSERT INTO classes (code, secret_hash, names_on, created, updated) VALUES (?,?,?,?,?)",
                        (code, secret_hash(secret), int(names_on), now, now),
                    )
                    return code, secret
                except sqlite3.IntegrityError:
                    continue
        raise ClassError("Could not draw a free class code; try again.")

    def _teacher(self, db, code: str, secret: str):
        row = self._row(db, code)
        if not secret or not secrets.compare_digest(row[1], secret_hash(secret)):
            raise ClassError("Only the teacher who started this class can change it.")
        return row

    def publish(self, code: str, secret: str, state: dict) -> int:
        payload = json.dumps(state, separators=(",", ":"))
        with self._connect() as db:
            row = self._teacher(db, code, secret)
            db.execute(
                "UPDATE classes SET state=?, version=version+1, updated=? WHERE code=?",
                (payload, self.clock(), row[0]),
            )
            return db.execute("SELECT version FROM classes WHERE code=?", (row[0],)).fetchone()[0]

    def open_guess(self, code: str, secret: str, step: str | None) -> None:
        with self._connect() as db:
            row = self._teacher(db, code, secret)
            db.execute(
                "UPDATE classes SET guess_step=?, version=version+1, updated=? WHERE code=?",
                (step, self.clock(), row[0]),
            )

    def end(self, code: str, secret: str) -> None:
        with self._connect() as db:
            row = self._teacher(db, code, secret)
            self._delete(db, row[0])

    # -- students -------------------------------------------------------------------------------
    def join(self, code: str, name: str = "") -> str:
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # count and insert as one step: the cap holds under a rush
            row = self._row(db, code)
            members = db.execute("SELECT COUNT(*) FROM members WHERE code=?", (row[0],)).fetchone()[0]
            if members >= self.max_members:
                db.execute("ROLLBACK")
                raise ClassError(f"Class {row[0]} is full ({self.max_members} students); ask the teacher.")
            member = secrets.token_urlsafe(12)
            db.execute(
                "INSERT INTO members (code, member, name, joined) VALUES (?,?,?,?)",
                (row[0], member, str(name)[:40], self.clock()),
            )
            db.execute("COMMIT")
        return member

    def answer(self, code: str, member: str, step: str, token_id: int, stated_prob: float | None = None) -> None:
        if stated_prob is not None and not 0.0 <= float(stated_prob) <= 1.0:
            raise ClassError("A probability is a number from 0 to 1 (0% to 100%).")
        with self._connect() as db:
            row = self._row(db, code)
            if row[5] != step:
                raise ClassError("Guessing for this step has closed: the teacher has moved on.")
            known = db.execute("SELECT 1 FROM members WHERE code=? AND member=?", (row[0], member)).fetchone()
            if known is None:
                raise ClassError("You are not in this class any more: open the class link again to rejoin.")
            db.execute(
                "INSERT OR REPLACE INTO guesses (code, step, member, token_id, stated_prob, at) VALUES (?,?,?,?,?,?)",
                (row[0], step, member, int(token_id), stated_prob, self.clock()),
            )

    # -- housekeeping ---------------------------------------------------------------------------
    def _delete(self, db, code: str) -> None:
        for table in ("guesses", "members", "classes"):
            db.execute(f"DELETE FROM {table} WHERE code=?", (code,))

    def _sweep(self, db) -> None:
        """Delete every class idle past the timeout (run when a class is created)."""
        cutoff = self.clock() - self.idle_seconds
        for (code,) in db.execute("SELECT code FROM classes WHERE updated < ?", (cutoff,)).fetchall():
            self._delete(db, code)


class _Closing:
    """A sqlite3 connection as a context manager that closes it (sqlite3's own only ends a transaction)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        return self.db

    def __exit__(self, *exc) -> None:
        self.db.close()
