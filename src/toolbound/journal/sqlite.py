"""The journal in an SQLite file."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from toolbound._loopguard import check_off_loop
from toolbound._wal import WAL_BOUND, Checkpoints, Turns
from toolbound.journal._records import JournalError
from toolbound.journal._sql import SQLJournal
from toolbound.journal.schema import create

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from toolbound.journal.schema import Cursor

__all__ = ["SQLiteJournal"]


class SQLiteJournal(SQLJournal):
    """The journal in an SQLite file.

    WAL with ``synchronous=NORMAL``: durable across a crash of the process, which is
    what a service restart must survive (the ledger, which guards effects, syncs fully).
    A commit is durable once it is in the WAL; copying the WAL's pages into the
    database file (a checkpoint, which syncs the file) is done by a thread of its own,
    off the writers' path, and by a writer only when the WAL has grown past a bound.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0) -> None:
        self.path = str(path)
        self.busy_timeout = busy_timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._writer = threading.Lock()
        self._turns = Turns(self.path)
        try:
            with self._tx() as cur:
                create(cur, _column_names, self._mark)
        except BaseException:
            self._close_connections()  # a journal refused (a newer format) holds nothing
            raise
        self._checkpoints = Checkpoints(self.path, synchronous="NORMAL", owner="journal")

    def _connection(self) -> sqlite3.Connection:
        check_off_loop("the journal (SQLite)")
        conn = cast("sqlite3.Connection | None", getattr(self._local, "conn", None))
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_BOUND}")
            self._local.conn = conn
            with self._guard:
                self._all.append(conn)
        return conn

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Cursor]:
        with _mapped(), self._queued(write=write):
            conn = self._connection()
            cur = conn.cursor()
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield cast("Cursor", cur)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    @contextmanager
    def _queued(self, *, write: bool) -> Iterator[None]:
        """A write transaction of this process waits for the one before it on a lock.

        SQLite's busy handler polls with growing sleeps (1 ms, 2 ms, 5 ms, …). The
        service runs its pipelines on many threads under one GIL: a thread holding the
        write lock is often waiting for the GIL, and every other writer of the process,
        failing to take SQLite's lock, oversleeps and retries. Queued on a lock, the
        next writer is woken as soon as the last commits. Between processes (replicas
        on one file) writers then take turns on the file's lock (:class:`Turns`), both
        waits bounded by ``busy_timeout`` together. Reads never queue (WAL).
        """
        if not write:
            yield
            return
        deadline = time.monotonic() + self.busy_timeout
        if not self._writer.acquire(timeout=self.busy_timeout):
            msg = f"journal {self.path}: still locked by another writer after busy_timeout"
            raise JournalError(msg, code="storage_unavailable")
        try:
            refused = self._turns.take(deadline)
            if refused is not None:
                msg = f"journal {self.path}: {refused}"
                raise JournalError(msg, code="storage_unavailable")
            try:
                yield
            finally:
                self._turns.give()
        finally:
            self._writer.release()

    @contextmanager
    def _alone(self) -> Iterator[Cursor]:
        with _mapped():
            cur = self._connection().cursor()
            try:
                yield cast("Cursor", cur)
            finally:
                cur.close()  # the statement's read snapshot ends here, not at collection

    def close(self) -> None:
        """Stop the checkpoints and close every thread's connection."""
        self._checkpoints.stop()
        self._close_connections()
        self._turns.close()

    def _close_connections(self) -> None:
        with self._guard:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


@contextmanager
def _mapped() -> Iterator[None]:
    """SQLite's operational failures as the journal's ``storage_*`` errors.

    Locked past the busy timeout, a disk I/O error, a full disk (``database or disk
    is full``), a file that cannot be opened: a store that cannot answer now. The
    service answers them 503; constraint and programming errors pass unchanged.
    """
    try:
        yield
    except sqlite3.OperationalError as exc:
        full = "full" in str(exc)
        code = "storage_full" if full else "storage_unavailable"
        msg = f"the journal's SQLite file cannot answer now: {exc}"
        raise JournalError(msg, code=code) from exc


def _column_names(cur: Cursor) -> set[str]:
    cur.execute("SELECT name FROM pragma_table_info('toolbound_service_calls')")
    return {str(row[0]) for row in cur.fetchall()}
