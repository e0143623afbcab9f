"""The class store on PostgreSQL (psycopg 3): app hosts on several machines share one class.

`INFERENCE_LAB_CLASS_DB=postgresql://user:password@host:5432/dbname` (any libpq URL) selects it. Its SQL is
`store_sql`'s, with `%s` placeholders and row locks (`FOR UPDATE`, `FOR SHARE`) where SQLite locks the whole
file. The schema is created on first use under an advisory lock, so two hosts starting together do not both
create it.

Connections: opening one costs a few milliseconds (a TCP handshake and a backend process), more than a
follower's whole poll, so each store keeps up to `POOL` idle connections and reuses them (psycopg_pool would
do the same; this is the 20 lines a store needs). A connection that failed is dropped, not reused: after a
database restart the next operation opens a fresh one.
"""

from __future__ import annotations

import queue
import time
from contextlib import contextmanager

import psycopg
from psycopg import errors

from inference.lessons.classroom.store_base import ClassError
from inference.lessons.classroom.store_sql import SqlClassStore

POOL = 8  # idle connections kept per store (per app process); more are opened when needed, then closed
SCHEMA_LOCK = 4_901_049  # pg_advisory_xact_lock's key for the schema (any constant this app owns)
CONNECT_TIMEOUT_S = 5


class PostgresClassStore(SqlClassStore):
    REAL = "DOUBLE PRECISION"
    LOCK_FOR_UPDATE = " FOR UPDATE"
    LOCK_FOR_SHARE = " FOR SHARE"

    def __init__(self, url: str, idle_seconds: float = 2 * 3600, max_members: int = 60, clock=time.time):
        super().__init__(idle_seconds, max_members, clock)
        self.url = url
        self._idle: queue.LifoQueue = queue.LifoQueue(POOL)
        self._migrate()

    def _connection(self) -> psycopg.Connection:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as err:
            raise ClassError(self._unreachable(err)) from err

    def _unreachable(self, err: Exception) -> str:
        where = psycopg.conninfo.conninfo_to_dict(self.url)
        return (
            f"The class database at {where.get('host', 'localhost')}:{where.get('port', 5432)} does not answer "
            f"({str(err).strip().splitlines()[0][:120]}); the class goes on when it is back: try again in a moment."
        )

    def _release(self, conn: psycopg.Connection) -> None:
        if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.close()
            return
        try:
            self._idle.put_nowait(conn)
        except queue.Full:
            conn.close()

    @contextmanager
    def _transaction(self, write: bool):
        conn = self._connection()
        try:
            if write:
                with conn.transaction():
                    yield conn
            else:
                yield conn
        except psycopg.OperationalError as err:
            conn.close()  # a broken connection (the server restarted): never handed out again
            raise ClassError(self._unreachable(err)) from err
        finally:
            self._release(conn)

    def _rows(self, db, sql: str, params: tuple = ()) -> list[tuple]:
        cur = db.execute(sql.replace("?", "%s"), params)
        return cur.fetchall() if cur.description is not None else []

    def _is_duplicate(self, err: Exception) -> bool:
        return isinstance(err, errors.UniqueViolation)

    def _schema_lock(self, db) -> None:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))

    def close(self) -> None:
        """Close the idle connections (a test's store; the app's lives as long as its process)."""
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
