"""The class store in one SQLite file (WAL mode): every app process on this machine opens the same file.

The embedded default (`INFERENCE_LAB_CLASS_DB` a file path): no server, survives a process restart, and WAL
lets every process read while one writes. App hosts on several machines need `store_postgres` instead.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from inference.lessons.classroom.store_sql import SqlClassStore


class SqliteClassStore(SqlClassStore):
    def __init__(self, path: str | Path, idle_seconds: float = 2 * 3600, max_members: int = 60, clock=time.time):
        super().__init__(idle_seconds, max_members, clock)
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
        finally:
            db.close()
        self._migrate()

    @contextmanager
    def _transaction(self, write: bool):
        # One connection per operation: Streamlit runs each session in its own thread, and a sqlite3
        # connection must not cross threads. busy_timeout makes a writer wait for another process's write;
        # BEGIN IMMEDIATE takes the write lock at once, so a check and its write see no other writer between.
        db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
        try:
            db.execute("PRAGMA busy_timeout=5000")
            if not write:
                yield db
                return
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    def _rows(self, db, sql: str, params: tuple = ()) -> list[tuple]:
        return db.execute(sql, params).fetchall()

    def _is_duplicate(self, err: Exception) -> bool:
        return isinstance(err, sqlite3.IntegrityError)

    def _schema_lock(self, db) -> None:
        """BEGIN IMMEDIATE already holds the file's write lock."""
