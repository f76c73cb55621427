"""The journal in an SQLite file."""

from __future__ import annotations

import logging
import sqlite3
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from toolbound.journal._sql import SQLJournal
from toolbound.journal.schema import create

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from toolbound.journal._records import ClaimedRequest
    from toolbound.journal.schema import Cursor

__all__ = ["SQLiteJournal"]

_log = logging.getLogger(__name__)


_CHECKPOINT_EVERY = 0.1
"""Seconds between the background checkpoints of the write-ahead log."""
_WAL_BOUND = 8192
"""WAL pages past which a writer checkpoints itself (the background fell behind)."""


class SQLiteJournal(SQLJournal):
    """The journal in an SQLite file.

    WAL with ``synchronous=NORMAL``: durable across a crash of the process, which is
    what a service restart must survive (the ledger, which guards effects, syncs fully).
    A commit is durable once it is in the WAL; copying the WAL's pages into the
    database file (a checkpoint, which syncs the file) is done by a thread of its own,
    off the writers' path, and by a writer only when the WAL has grown past a bound.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        with self._tx() as cur:
            create(cur, _column_names, self._mark)
        self._checkpoints = _Checkpoints(self.path)

    def _connection(self) -> sqlite3.Connection:
        conn = cast("sqlite3.Connection | None", getattr(self._local, "conn", None))
        if conn is None:
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_BOUND}")
            self._local.conn = conn
            with self._guard:
                self._all.append(conn)
        return conn

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Cursor]:
        conn = self._connection()
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield cast("Cursor", cur)
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    def peek_request(self, tenant: str, key: str, fingerprint: str) -> ClaimedRequest | None:
        """What an earlier request with ``key`` found: one statement, its own snapshot."""
        return self._existing(cast("Cursor", self._connection().cursor()), tenant, key, fingerprint)

    def close(self) -> None:
        """Stop the checkpoints and close every thread's connection."""
        self._checkpoints.stop()
        with self._guard:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


class _Checkpoints:
    """A thread that checkpoints the journal's WAL every ``_CHECKPOINT_EVERY`` seconds.

    Passive: it never waits for, nor blocks, a reader or a writer; what it cannot copy
    yet it copies next time.
    """

    def __init__(self, path: str) -> None:
        self._path = path
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="toolbound-journal-checkpoints", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error:
            # The file is gone already: nothing to copy; writers checkpoint themselves.
            _log.warning("the journal's checkpoints could not start on %s", self._path)
            return
        try:
            while not self._stopped.wait(_CHECKPOINT_EVERY):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    # Busy or unreadable for a moment: the next round tries again, and
                    # a writer checkpoints itself past the bound.
                    continue
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop the thread (its last checkpoint finishes first)."""
        self._stopped.set()
        self._thread.join()


def _column_names(cur: Cursor) -> set[str]:
    cur.execute("SELECT name FROM pragma_table_info('toolbound_service_calls')")
    return {str(row[0]) for row in cur.fetchall()}
