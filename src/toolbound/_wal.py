"""Checkpoints of an SQLite write-ahead log, off the writers' path (the ledger, the journal).

In WAL mode a commit is durable once its frames are in the WAL (fsynced at ``FULL``;
at ``NORMAL`` a commit is in the log, not yet synced). Copying those pages into the
database file — a checkpoint, which syncs the WAL and then the file — is
housekeeping: by default SQLite makes whichever commit first finds the WAL past
1,000 pages do it, so every few hundred writes one caller waits for the syncs and
the copy (on an event loop's thread, every connection waits). Here a thread does it instead, every
:data:`EVERY` seconds, and a writer checkpoints itself only when the WAL has grown past
:data:`WAL_BOUND` pages (the thread fell behind, or is not running, as in a forked
child). What is durable, and when, does not change.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
from typing import Final

__all__ = ["EVERY", "WAL_BOUND", "Checkpoints", "Turns"]

_log = logging.getLogger(__name__)

EVERY: Final = 0.1
"""Seconds between background checkpoints."""
WAL_BOUND: Final = 8192
"""WAL pages past which a writer checkpoints itself (``PRAGMA wal_autocheckpoint``)."""


class Checkpoints:
    """A thread that checkpoints the WAL of the SQLite file at ``path``, passively.

    Passive: it never waits for, nor blocks, a reader or a writer; what it cannot copy
    yet it copies next time. ``synchronous`` is the file's level (the checkpoint syncs
    as its writers do); ``every`` the seconds between checkpoints.
    """

    def __init__(self, path: str, *, synchronous: str, owner: str, every: float = EVERY) -> None:
        """Start checkpointing ``path``; ``owner`` names the thread (``ledger``, ``journal``)."""
        self._path = path
        self._owner = owner
        self._synchronous = synchronous
        self._every = every
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"toolbound-{owner}-checkpoints", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
            conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        except sqlite3.Error:
            # The file is gone or unreadable: writers checkpoint themselves past the bound.
            _log.warning("the %s's checkpoints could not start on %s", self._owner, self._path)
            return
        try:
            while not self._stopped.wait(self._every):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    # Busy, full or unreadable for a moment: the next round tries again,
                    # and a writer checkpoints itself past the bound.
                    continue
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop the thread (its last checkpoint finishes first)."""
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()


class Turns:
    """The writers of every process on one SQLite file take turns on a lock file beside it.

    SQLite arbitrates its write lock between processes with a busy handler that sleeps
    1, 2, 5, 10, … up to 100 ms between tries: two replicas writing one file make each
    other's writers oversleep, and their p99 grows by those sleeps. Holding an
    ``flock`` on ``<file>-turns`` around each write transaction (after the process's
    own queue), a writer that finds the lock held tries again within ``_MAX_NAP``
    seconds, so the wait is about as long as the other's transaction. The busy
    handler still arbitrates with any writer that does not take turns.
    """

    def __init__(self, path: str) -> None:
        self._path = path + "-turns"
        self._fd = -1
        self._pid = -1

    def take(self, deadline: float) -> str | None:
        """Hold the turn, polling until ``deadline`` (``time.monotonic``).

        None once held; else why not, for the store's ``storage_unavailable`` error:
        another process held it past the deadline, or the lock file cannot be used.
        """
        try:
            fd = self._open()
            nap = _FIRST_NAP
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass
                else:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return "still locked by another process after busy_timeout"
                time.sleep(min(nap, left))
                nap = min(nap * 2, _MAX_NAP)
        except OSError as exc:  # the lock file cannot be made or locked
            return f"its turns file cannot be used: {exc}"

    def give(self) -> None:
        """End this process's turn (closed meanwhile: it ended with the file)."""
        if self._fd >= 0 and self._pid == os.getpid():
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _open(self) -> int:
        if self._pid != os.getpid():
            # A forked child shares its parent's open file, and so its lock: open anew.
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = os.getpid()
        return self._fd

    def close(self) -> None:
        """Close the lock file (a held turn ends with it)."""
        if self._fd >= 0 and self._pid == os.getpid():
            os.close(self._fd)
        self._fd, self._pid = -1, -1


_FIRST_NAP: Final = 50e-6
_MAX_NAP: Final = 500e-6
