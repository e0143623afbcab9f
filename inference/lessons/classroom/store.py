"""Where a class lives: `open_store(location)` opens SQLite's file or PostgreSQL's database.

The interface and its records are in `store_base` (re-exported here, so `store.ClassStore`, `store.ClassError`...
read as before); the SQL both run is `store_sql`; see `store_base` for the design and its security.
"""

from __future__ import annotations

from inference.lessons.classroom.store_base import (
    CODE_ALPHABET,
    CODE_LENGTH,
    POSTGRES_SCHEMES,
    SOMETHING_ELSE,
    ClassError,
    ClassInfo,
    ClassStore,
    Tally,
    is_postgres_url,
    new_code,
    normalise_code,
    secret_hash,
)
from inference.lessons.classroom.store_postgres import PostgresClassStore
from inference.lessons.classroom.store_sqlite import SqliteClassStore

__all__ = [
    "CODE_ALPHABET",
    "CODE_LENGTH",
    "POSTGRES_SCHEMES",
    "SOMETHING_ELSE",
    "ClassError",
    "ClassInfo",
    "ClassStore",
    "PostgresClassStore",
    "SqliteClassStore",
    "Tally",
    "is_postgres_url",
    "new_code",
    "normalise_code",
    "open_store",
    "secret_hash",
]


def open_store(location: str, idle_seconds: float = 2 * 3600, max_members: int = 60) -> ClassStore:
    """The store at `location`: a `postgresql://` URL (PostgreSQL) or a file path (SQLite)."""
    if is_postgres_url(location):
        return PostgresClassStore(location, idle_seconds=idle_seconds, max_members=max_members)
    return SqliteClassStore(location, idle_seconds=idle_seconds, max_members=max_members)
