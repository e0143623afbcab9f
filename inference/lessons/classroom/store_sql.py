"""The class store's SQL, written once for SQLite and PostgreSQL: a subclass gives connections, transactions
and the few words where the two differ (a float column's type, row locks).

No read-modify-write: a count goes up inside the UPDATE (`version = version + 1 ... RETURNING version`), an
answer is one upsert (`INSERT ... ON CONFLICT (code, step, member) DO UPDATE`), and the two checks that must
hold with the write (the class is not full; the step is still open) are made inside the write's transaction
with the class row locked: `BEGIN IMMEDIATE` on SQLite (one writer at a time), `SELECT ... FOR UPDATE` /
`FOR SHARE` on PostgreSQL (a join waits for another join to the same class; closing a step waits for the
answers already being written, and an answer that comes later reads the step closed).

The schema is versioned: `schema_version` holds the number of `MIGRATIONS` applied; a store applies the rest
on first use, in one transaction that other processes wait for.
"""

from __future__ import annotations

import json
import secrets
from abc import abstractmethod
from contextlib import AbstractContextManager

from inference.core.wording import plural
from inference.lessons.classroom.store_base import (
    ClassError,
    ClassInfo,
    ClassStore,
    Tally,
    new_code,
    normalise_code,
    secret_hash,
)

# Each entry brings the schema from version i to i + 1; `{real}` is a 64-bit float column (REAL in SQLite,
# DOUBLE PRECISION in PostgreSQL, whose REAL has 24 bits: not enough for a Unix time). Never edit an entry:
# add one.
MIGRATIONS = (
    """
    CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, names_on INTEGER NOT NULL,
        state TEXT, version INTEGER NOT NULL DEFAULT 0, guess_step TEXT,
        created {real} NOT NULL, updated {real} NOT NULL);
    CREATE TABLE IF NOT EXISTS members (
        code TEXT NOT NULL, member TEXT NOT NULL, name TEXT NOT NULL, joined {real} NOT NULL,
        PRIMARY KEY (code, member));
    CREATE TABLE IF NOT EXISTS guesses (
        code TEXT NOT NULL, step TEXT NOT NULL, member TEXT NOT NULL, token_id INTEGER NOT NULL,
        stated_prob {real}, at {real} NOT NULL, PRIMARY KEY (code, step, member))
    """,
    # Failover (inference/lessons/classroom/resume.py): the teacher's browser key and the run's checkpoint.
    """
    ALTER TABLE classes ADD COLUMN teacher_hash TEXT;
    ALTER TABLE classes ADD COLUMN checkpoint TEXT;
    CREATE INDEX IF NOT EXISTS classes_teacher ON classes (teacher_hash)
    """,
)
CLASS_COLUMNS = "code, secret_hash, names_on, state, version, guess_step, updated, teacher_hash"


class SqlClassStore(ClassStore):
    """A class store over SQL. A class untouched for `idle_seconds` is gone (its rows deleted on the next
    operation that meets it); at most `max_members` students join one class."""

    REAL = "REAL"
    LOCK_FOR_UPDATE = ""  # PostgreSQL: " FOR UPDATE" (SQLite's write transaction locks the whole file)
    LOCK_FOR_SHARE = ""

    def __init__(self, idle_seconds: float, max_members: int, clock):
        self.idle_seconds = idle_seconds
        self.max_members = max_members
        self.clock = clock

    # -- what a back end gives ------------------------------------------------------------------
    @abstractmethod
    def _transaction(self, write: bool) -> AbstractContextManager:
        """A connection in a transaction (`write`: one that will write, begun as such) or, without `write`, in
        autocommit; committed when the block ends, rolled back on an exception."""

    @abstractmethod
    def _rows(self, db, sql: str, params: tuple = ()) -> list[tuple]:
        """Run one statement written with `?` placeholders; its rows ([] for a statement that returns none)."""

    def _is_duplicate(self, err: Exception) -> bool:
        raise NotImplementedError

    @abstractmethod
    def _schema_lock(self, db) -> None:
        """Make other processes wait while this one reads and migrates the schema (inside a write transaction)."""

    # -- the schema -------------------------------------------------------------------------------
    def _migrate(self) -> int:
        with self._transaction(write=True) as db:
            self._schema_lock(db)
            self._rows(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            found = self._rows(db, "SELECT version FROM schema_version")
            if not found:
                self._rows(db, "INSERT INTO schema_version (version) VALUES (0)")
            version = found[0][0] if found else 0
            for migration in MIGRATIONS[version:]:
                for statement in migration.format(real=self.REAL).split(";"):
                    if statement.strip():
                        self._rows(db, statement)
            self._rows(db, "UPDATE schema_version SET version = ?", (len(MIGRATIONS),))
        return len(MIGRATIONS)

    def schema_version(self) -> int:
        with self._transaction(write=False) as db:
            return self._rows(db, "SELECT version FROM schema_version")[0][0]

    # -- reading ----------------------------------------------------------------------------
    def _row(self, db, code: str, lock: str = ""):
        code = normalise_code(code)
        rows = self._rows(db, f"SELECT {CLASS_COLUMNS} FROM classes WHERE code=?{lock}", (code,))
        if not rows:
            raise ClassError(f"There is no class with the code {code or '(empty)'}: check the code or the link.")
        row = rows[0]
        if self.clock() - row[6] > self.idle_seconds:
            self._delete(db, code)
            raise ClassError(
                f"Class {code} has ended: nobody used it for {plural(round(self.idle_seconds / 60), 'minute')}. "
                "Ask the teacher for a new code."
            )
        return row

    def info(self, code: str) -> ClassInfo:
        with self._transaction(write=False) as db:
            row = self._row(db, code)
            members = self._rows(db, "SELECT COUNT(*) FROM members WHERE code=?", (row[0],))[0][0]
        state = json.loads(row[3]) if row[3] else None
        return ClassInfo(row[0], bool(row[2]), state, row[4], row[5], members, row[6])

    def tally(self, code: str, step: str) -> Tally:
        with self._transaction(write=False) as db:
            row = self._row(db, code)
            rows = self._rows(
                db,
                "SELECT g.token_id, g.stated_prob, m.name FROM guesses g JOIN members m "
                "ON m.code=g.code AND m.member=g.member WHERE g.code=? AND g.step=?",
                (row[0], step),
            )
        counts, probs, names = {}, {}, {}
        for token_id, stated, name in rows:
            counts[token_id] = counts.get(token_id, 0) + 1
            if stated is not None:
                probs.setdefault(token_id, []).append(stated)
            if row[2] and name:
                names.setdefault(token_id, []).append(name)
        return Tally(step, counts, probs, names, len(rows))

    def taught_by(self, teacher_key: str) -> tuple[str, dict | None] | None:
        if not teacher_key:
            return None
        with self._transaction(write=False) as db:
            rows = self._rows(
                db,
                "SELECT code, checkpoint FROM classes WHERE teacher_hash=? AND updated>=? ORDER BY updated DESC",
                (secret_hash(teacher_key), self.clock() - self.idle_seconds),
            )
        if not rows:
            return None
        return rows[0][0], json.loads(rows[0][1]) if rows[0][1] else None

    # -- the teacher --------------------------------------------------------------------------
    def create(self, names_on: bool = False, teacher_key: str | None = None) -> tuple[str, str]:
        secret = secrets.token_urlsafe(24)
        now = self.clock()
        with self._transaction(write=True) as db:
            self._sweep(db)
        for _ in range(10):  # a clash among 8.5e11 codes is unlikely; never reuse a live one
            code = new_code()
            try:
                with self._transaction(write=True) as db:
                    self._rows(
                        db,
                        "INSERT INTO classes (code, secret_hash, names_on, created, updated, teacher_hash) "
                        "VALUES (?,?,?,?,?,?)",
                        (code, secret_hash(secret), int(names_on), now, now,
                         secret_hash(teacher_key) if teacher_key else None),
                    )  # fmt: skip
                return code, secret
            except Exception as err:
                if not self._is_duplicate(err):
                    raise
        raise ClassError("Could not draw a free class code; try again.")

    def _teacher(self, db, code: str, secret: str, lock: str = ""):
        """The class row, if `secret` is the teacher's secret or the teacher's browser key."""
        row = self._row(db, code, lock)
        given = secret_hash(secret) if secret else ""
        if not secret or not (
            secrets.compare_digest(row[1], given) or (row[7] is not None and secrets.compare_digest(row[7], given))
        ):
            raise ClassError("Only the teacher who started this class can change it.")
        return row

    def publish(self, code: str, secret: str, state: dict, checkpoint: dict | None = None) -> int:
        payload = json.dumps(state, separators=(",", ":"))
        saved = json.dumps(checkpoint, separators=(",", ":")) if checkpoint is not None else None
        with self._transaction(write=True) as db:
            row = self._teacher(db, code, secret)
            return self._rows(
                db,
                "UPDATE classes SET state=?, checkpoint=COALESCE(?, checkpoint), version=version+1, updated=? "
                "WHERE code=? RETURNING version",
                (payload, saved, self.clock(), row[0]),
            )[0][0]

    def open_guess(self, code: str, secret: str, step: str | None) -> None:
        with self._transaction(write=True) as db:
            row = self._teacher(db, code, secret, self.LOCK_FOR_UPDATE)  # waits for answers being written
            self._rows(
                db,
                "UPDATE classes SET guess_step=?, version=version+1, updated=? WHERE code=?",
                (step, self.clock(), row[0]),
            )

    def end(self, code: str, secret: str) -> None:
        with self._transaction(write=True) as db:
            row = self._teacher(db, code, secret, self.LOCK_FOR_UPDATE)
            self._delete(db, row[0])

    # -- students -------------------------------------------------------------------------------
    def join(self, code: str, name: str = "") -> str:
        with self._transaction(write=True) as db:
            row = self._row(db, code, self.LOCK_FOR_UPDATE)  # count and insert as one step: the cap holds
            members = self._rows(db, "SELECT COUNT(*) FROM members WHERE code=?", (row[0],))[0][0]
            if members >= self.max_members:
                raise ClassError(f"Class {row[0]} is full ({self.max_members} students); ask the teacher.")
            member = secrets.token_urlsafe(12)
            self._rows(
                db,
                "INSERT INTO members (code, member, name, joined) VALUES (?,?,?,?)",
                (row[0], member, str(name)[:40], self.clock()),
            )
        return member

    def answer(self, code: str, member: str, step: str, token_id: int, stated_prob: float | None = None) -> None:
        if stated_prob is not None and not 0.0 <= float(stated_prob) <= 1.0:
            raise ClassError("A probability is a number from 0 to 1 (0% to 100%).")
        with self._transaction(write=True) as db:
            row = self._row(db, code, self.LOCK_FOR_SHARE)  # closing the step waits for this answer
            if row[5] != step:
                raise ClassError("Guessing for this step has closed: the teacher has moved on.")
            if not self._rows(db, "SELECT 1 FROM members WHERE code=? AND member=?", (row[0], member)):
                raise ClassError("You are not in this class any more: open the class link again to rejoin.")
            self._rows(
                db,
                "INSERT INTO guesses (code, step, member, token_id, stated_prob, at) VALUES (?,?,?,?,?,?) "
                "ON CONFLICT (code, step, member) DO UPDATE SET token_id=excluded.token_id, "
                "stated_prob=excluded.stated_prob, at=excluded.at",
                (row[0], step, member, int(token_id), stated_prob, self.clock()),
            )

    # -- housekeeping ---------------------------------------------------------------------------
    def _delete(self, db, code: str) -> None:
        for table in ("guesses", "members", "classes"):
            self._rows(db, f"DELETE FROM {table} WHERE code=?", (code,))

    def _sweep(self, db) -> None:
        """Delete every class idle past the timeout (run when a class is created)."""
        cutoff = self.clock() - self.idle_seconds
        for (code,) in self._rows(db, "SELECT code FROM classes WHERE updated < ?", (cutoff,)):
            self._delete(db, code)
