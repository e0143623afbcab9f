"""Where a class lives: one SQL store every app process opens, SQLite on one machine, PostgreSQL for several.

A class is a row (code, hash of the teacher's secret, last published state, the step open for guesses), its members
and their guesses (one per member and step: answering again replaces it). No read-modify-write: a version goes up
inside the UPDATE, an answer is one upsert, and the checks that must hold with a write (the class is not full, the
step is still open) run in the write's transaction with the class row locked. Only SHA-256 hashes of the teacher's
secret and browser key are stored; codes are drawn by `secrets` from 31**8 values.
"""

from __future__ import annotations

import hashlib
import json
import queue
import secrets
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import errors

from inference.core.wording import plural

CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"  # no 0/O or 1/I/L: a code read off a projector is typed as read
CODE_LENGTH = 8
SOMETHING_ELSE = -1  # a guess outside the top 10 the students were offered
# `{real}` is a 64-bit float (PostgreSQL's REAL has 24 bits: not enough for a Unix time).
SCHEMA = """
    CREATE TABLE IF NOT EXISTS classes (
        code TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, names_on INTEGER NOT NULL,
        state TEXT, version INTEGER NOT NULL DEFAULT 0, guess_step TEXT,
        created {real} NOT NULL, updated {real} NOT NULL, teacher_hash TEXT, checkpoint TEXT);
    CREATE INDEX IF NOT EXISTS classes_teacher ON classes (teacher_hash);
    CREATE TABLE IF NOT EXISTS members (
        code TEXT NOT NULL, member TEXT NOT NULL, name TEXT NOT NULL, joined {real} NOT NULL,
        PRIMARY KEY (code, member));
    CREATE TABLE IF NOT EXISTS guesses (
        code TEXT NOT NULL, step TEXT NOT NULL, member TEXT NOT NULL, token_id INTEGER NOT NULL,
        stated_prob {real}, at {real} NOT NULL, PRIMARY KEY (code, step, member))
"""
CLASS_COLUMNS = "code, secret_hash, names_on, state, version, guess_step, updated, teacher_hash"


class ClassError(ValueError):
    """A class operation that cannot be done, with one sentence saying why."""


@dataclass(frozen=True)
class ClassInfo:
    code: str
    names_on: bool
    state: dict | None  # what the teacher last published (TeacherRun.publish)
    version: int  # goes up with every publish: followers redraw only when it changes
    guess_step: str | None
    members: int


@dataclass(frozen=True)
class Tally:
    step: str
    counts: dict[int, int]  # token id (or SOMETHING_ELSE) -> answers
    stated_probs: dict[int, list[float]]  # token id -> the probabilities students gave
    names: dict[int, list[str]]  # token id -> names, only when the teacher turned names on
    answers: int


def normalise_code(text: str) -> str:
    return "".join(ch for ch in str(text).upper() if ch.isalnum())


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# -- two connection factories: `transaction(write)` yields `run(sql, params) -> rows` ------------------------------
class SqliteConnections:
    real, for_update, for_share, schema_lock = "REAL", "", "", None  # BEGIN IMMEDIATE locks the whole file
    duplicate = sqlite3.IntegrityError

    def __init__(self, path: str):
        self.path = path
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with self.transaction(write=False) as run:
            run("PRAGMA journal_mode=WAL")

    @contextmanager
    def transaction(self, write: bool):
        # One connection per operation: a sqlite3 connection must not cross threads (one per Streamlit session).
        db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        try:
            with db:  # commits, or rolls back on an exception
                if write:  # the write lock at once: no other writer between check and write
                    db.execute("BEGIN IMMEDIATE")
                yield lambda sql, params=(): db.execute(sql, params).fetchall()
        finally:
            db.close()


class PostgresConnections:
    """psycopg 3, up to `POOL` idle connections kept (opening one costs more than a follower's poll); one that
    failed is closed, never reused."""

    real, for_update, for_share = "DOUBLE PRECISION", " FOR UPDATE", " FOR SHARE"
    schema_lock = "SELECT pg_advisory_xact_lock(4901049)"  # two hosts starting together do not both create it
    duplicate = errors.UniqueViolation
    POOL = 8

    def __init__(self, url: str):
        self.url = url
        self.idle: queue.LifoQueue = queue.LifoQueue(self.POOL)

    def _unreachable(self, err: Exception) -> ClassError:
        where = psycopg.conninfo.conninfo_to_dict(self.url)  # never the password
        return ClassError(
            f"The class database at {where.get('host', 'localhost')}:{where.get('port', 5432)} does not answer "
            f"({str(err).strip().splitlines()[0][:120]}); the class goes on when it is back: try again in a moment."
        )

    @contextmanager
    def transaction(self, write: bool):
        try:
            conn = self.idle.get_nowait()
        except queue.Empty:
            try:
                conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
            except psycopg.OperationalError as err:
                raise self._unreachable(err) from err

        def run(sql: str, params: tuple = ()) -> list[tuple]:
            cur = conn.execute(sql.replace("?", "%s"), params)
            return cur.fetchall() if cur.description is not None else []

        try:
            if write:
                with conn.transaction():
                    yield run
            else:
                yield run
        except psycopg.OperationalError as err:
            conn.close()
            raise self._unreachable(err) from err
        finally:
            if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.close()
            else:
                try:
                    self.idle.put_nowait(conn)
                except queue.Full:
                    conn.close()


class ClassStore:
    """`location`: a `postgresql://` URL or a SQLite file. A class untouched for `idle_seconds` is gone (deleted by
    the next operation that meets it); at most `max_members` students join one."""

    def __init__(self, location: str | Path, idle_seconds: float = 2 * 3600, max_members: int = 60, clock=time.time):
        location = str(location)
        postgres = location.startswith(("postgresql://", "postgres://"))
        self.db = PostgresConnections(location) if postgres else SqliteConnections(location)
        self.idle_seconds, self.max_members, self.clock = idle_seconds, max_members, clock
        with self.db.transaction(write=True) as run:
            if self.db.schema_lock:
                run(self.db.schema_lock)
            for statement in SCHEMA.format(real=self.db.real).split(";"):
                if statement.strip():
                    run(statement)

    def _row(self, run, code: str, lock: str = ""):
        code = normalise_code(code)
        rows = run(f"SELECT {CLASS_COLUMNS} FROM classes WHERE code=?{lock}", (code,))
        if not rows:
            raise ClassError(f"There is no class with the code {code or '(empty)'}: check the code or the link.")
        if self.clock() - rows[0][6] > self.idle_seconds:
            self._delete(run, code)
            raise ClassError(
                f"Class {code} has ended: nobody used it for {plural(round(self.idle_seconds / 60), 'minute')}. "
                "Ask the teacher for a new code."
            )
        return rows[0]

    def info(self, code: str) -> ClassInfo:
        with self.db.transaction(write=False) as run:
            row = self._row(run, code)
            members = run("SELECT COUNT(*) FROM members WHERE code=?", (row[0],))[0][0]
        return ClassInfo(row[0], bool(row[2]), json.loads(row[3]) if row[3] else None, row[4], row[5], members)

    def tally(self, code: str, step: str) -> Tally:
        with self.db.transaction(write=False) as run:
            row = self._row(run, code)
            rows = run(
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
        """The latest live class this browser key teaches, with its checkpoint; None if none."""
        if not teacher_key:
            return None
        with self.db.transaction(write=False) as run:
            rows = run(
                "SELECT code, checkpoint FROM classes WHERE teacher_hash=? AND updated>=? ORDER BY updated DESC",
                (secret_hash(teacher_key), self.clock() - self.idle_seconds),
            )
        return (rows[0][0], json.loads(rows[0][1]) if rows[0][1] else None) if rows else None

    # -- the teacher ----------------------------------------------------------------------------------------------
    def create(self, names_on: bool = False, teacher_key: str | None = None) -> tuple[str, str]:
        """A new class: (code, teacher secret). Sweeps out the classes idle past the timeout first."""
        secret, now = secrets.token_urlsafe(24), self.clock()
        with self.db.transaction(write=True) as run:
            for (code,) in run("SELECT code FROM classes WHERE updated < ?", (now - self.idle_seconds,)):
                self._delete(run, code)
        for _ in range(10):  # never reuse a live code
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            try:
                with self.db.transaction(write=True) as run:
                    run(
                        "INSERT INTO classes (code, secret_hash, names_on, created, updated, teacher_hash) "
                        "VALUES (?,?,?,?,?,?)",
                        (code, secret_hash(secret), int(names_on), now, now,
                         secret_hash(teacher_key) if teacher_key else None),
                    )  # fmt: skip
                return code, secret
            except self.db.duplicate:
                continue
        raise ClassError("Could not draw a free class code; try again.")

    def _teacher(self, run, code: str, secret: str, lock: str = ""):
        """The class row, if `secret` is the teacher's secret or the teacher's browser key."""
        row = self._row(run, code, lock)
        given = secret_hash(secret) if secret else ""
        if not secret or not any(h is not None and secrets.compare_digest(h, given) for h in (row[1], row[7])):
            raise ClassError("Only the teacher who started this class can change it.")
        return row

    def publish(self, code: str, secret: str, state: dict, checkpoint: dict | None = None) -> int:
        """The state followers draw (and, never sent to them, the run's checkpoint); returns the new version."""
        payload = json.dumps(state, separators=(",", ":"))
        saved = json.dumps(checkpoint, separators=(",", ":")) if checkpoint is not None else None
        with self.db.transaction(write=True) as run:
            row = self._teacher(run, code, secret)
            return run(
                "UPDATE classes SET state=?, checkpoint=COALESCE(?, checkpoint), version=version+1, updated=? "
                "WHERE code=? RETURNING version",
                (payload, saved, self.clock(), row[0]),
            )[0][0]

    def open_guess(self, code: str, secret: str, step: str | None) -> None:
        with self.db.transaction(write=True) as run:
            row = self._teacher(run, code, secret, self.db.for_update)  # waits for answers being written
            run(
                "UPDATE classes SET guess_step=?, version=version+1, updated=? WHERE code=?",
                (step, self.clock(), row[0]),
            )

    def end(self, code: str, secret: str) -> None:
        with self.db.transaction(write=True) as run:
            self._delete(run, self._teacher(run, code, secret, self.db.for_update)[0])

    # -- students -------------------------------------------------------------------------------------------------
    def join(self, code: str, name: str = "") -> str:
        with self.db.transaction(write=True) as run:
            row = self._row(run, code, self.db.for_update)  # count and insert as one step: the cap holds
            if run("SELECT COUNT(*) FROM members WHERE code=?", (row[0],))[0][0] >= self.max_members:
                raise ClassError(f"Class {row[0]} is full ({self.max_members} students); ask the teacher.")
            member = secrets.token_urlsafe(12)
            run("INSERT INTO members VALUES (?,?,?,?)", (row[0], member, str(name)[:40], self.clock()))
        return member

    def answer(self, code: str, member: str, step: str, token_id: int, stated_prob: float | None = None) -> None:
        if stated_prob is not None and not 0.0 <= float(stated_prob) <= 1.0:
            raise ClassError("A probability is a number from 0 to 1 (0% to 100%).")
        with self.db.transaction(write=True) as run:
            row = self._row(run, code, self.db.for_share)  # closing the step waits for this answer
            if row[5] != step:
                raise ClassError("Guessing for this step has closed: the teacher has moved on.")
            if not run("SELECT 1 FROM members WHERE code=? AND member=?", (row[0], member)):
                raise ClassError("You are not in this class any more: open the class link again to rejoin.")
            run(
                "INSERT INTO guesses VALUES (?,?,?,?,?,?) ON CONFLICT (code, step, member) DO UPDATE SET "
                "token_id=excluded.token_id, stated_prob=excluded.stated_prob, at=excluded.at",
                (row[0], step, member, int(token_id), stated_prob, self.clock()),
            )

    def _delete(self, run, code: str) -> None:
        for table in ("guesses", "members", "classes"):
            run(f"DELETE FROM {table} WHERE code=?", (code,))
