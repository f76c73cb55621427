"""The ledger in one SQLite file: the embedded default (R8, R9, R19).

Durability: the file is put in WAL mode and every connection runs with
``PRAGMA synchronous=FULL`` by default, so each phase is on disk (the WAL is fsynced)
before :meth:`SQLiteLedger.claim` or :meth:`SQLiteLedger.advance` returns — R9 wants
intent durable before any side effect. ``synchronous="NORMAL"`` skips that fsync: a
crash of the *process* loses nothing, but a power cut or OS crash may roll back the last
few commits, and a lost intent or executing record lets a write run twice. Choose it only
where the side effects are themselves idempotent or the machine cannot lose power.

Concurrency: each thread gets its own connection (readers never wait for writers in
WAL); every read-then-write runs under ``BEGIN IMMEDIATE``, which takes SQLite's write
lock up front, so two threads or two processes racing one key serialize and exactly one
is :class:`~toolbound.ledger.store.Claimed`. A writer waits up to ``busy_timeout``
seconds for the lock, then fails with ``LedgerError(code="storage_unavailable")``. A
process's own writers first queue on an in-process lock, which SQLite's sleeping busy
handler is poor at, then the processes on one file take turns on a lock file beside it
(``<file>-turns``), both waits bounded by ``busy_timeout`` together (see
``SQLiteLedger._writer``). With an fsync per commit, the writes that queued while one
commit was fsyncing go to disk together in the next transaction: one fsync for all of
them (group commit, ``SQLiteLedger._grouped``). Copying the WAL
into the database file (a checkpoint) is a thread's work, not a writer's
(:mod:`toolbound._wal`).

Errors: every :mod:`sqlite3` error is mapped at this boundary to
:class:`~toolbound.ledger.store.LedgerError` with a ``code``:

* ``corrupt_store`` — not a SQLite file, a damaged one, or another application's
  database (nothing is written to it);
* ``unsupported_schema`` — written by a newer toolbound;
* ``storage_full`` — the disk (or ``max_page_count``) is full; the write was rolled back;
* ``storage_unavailable`` — locked past ``busy_timeout``, I/O errors, a closed ledger.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal, Self, TypeVar

from toolbound._errors import ConfigurationError
from toolbound._loopguard import check_off_loop
from toolbound._wal import WAL_BOUND, Checkpoints, Turns
from toolbound.ledger._sql import (
    SOURCES_SQL,
    SWEEP_EVIDENCE,
    SWEEP_FROM,
    SWEEP_TO,
    dumps,
    explain_refused_advance,
    from_micros,
    loads_evidence,
    to_micros,
    validate_settings,
)
from toolbound.ledger.migrations import LEDGER_TABLE, VERSION_TABLE, pending
from toolbound.ledger.rules import (
    Existing,
    abandoned_before,
    decide_claim,
    intent_record,
    taken_over,
)
from toolbound.ledger.store import (
    Claim,
    Claimed,
    ExpiredPolicy,
    LedgerError,
    LedgerKey,
    LedgerRecord,
    dumps_result,
    loads_result,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from toolbound._model import Result
    from toolbound.ledger.store import Intent, Phase

__all__ = ["SQLiteLedger", "SQLiteTransaction", "Synchronous"]

Synchronous = Literal["FULL", "EXTRA", "NORMAL"]
"""SQLite's ``synchronous`` levels the ledger allows; ``OFF`` is not one (R9)."""

_COLUMNS = (
    "scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,"
    " deadline_us, created_us, updated_us, result, evidence, epoch"
)
_EXPECTED_COLUMNS = frozenset(c.strip() for c in _COLUMNS.split(","))
_INTERNAL_TABLES = frozenset({"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"})

# The SQL is written out with its table name (LEDGER_TABLE) rather than formatted in, so
# every statement can be read, and checked, as the one string SQLite runs. The one
# exception is the sweep's rule, which is rules.ABANDONED put in SQL by _sql.
_SELECT = """
    SELECT scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,
           deadline_us, created_us, updated_us, result, evidence, epoch
    FROM toolbound_ledger
"""
_GET = _SELECT + " WHERE scope = ? AND tool_version = ? AND key = ?"
_FIND = _SELECT + " WHERE invocation_id = ? ORDER BY rowid LIMIT 1"
_UNRESOLVED = _SELECT + " WHERE phase = 'unknown' ORDER BY created_us, rowid"
# A claim writes the record rules.decide_claim hands it (see _columns).
_INSERT = """
    INSERT INTO toolbound_ledger (
        scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,
        deadline_us, created_us, updated_us, result, evidence, epoch)
    VALUES (:scope, :tool_version, :key, :digest, :invocation_id, :tool, :canonical,
            :subject, :phase, :deadline_us, :created_us, :updated_us, :result, :evidence,
            :epoch)
    ON CONFLICT (scope, tool_version, key) DO NOTHING
"""
_OVERWRITE = """
    UPDATE toolbound_ledger
    SET digest = :digest, invocation_id = :invocation_id, tool = :tool,
        canonical = :canonical, subject = :subject, phase = :phase,
        deadline_us = :deadline_us, created_us = :created_us, updated_us = :updated_us,
        result = :result, evidence = :evidence, epoch = :epoch
    WHERE scope = :scope AND tool_version = :tool_version AND key = :key
"""
_LOOKUP = """
    SELECT digest, invocation_id, phase, created_us, result, epoch FROM toolbound_ledger
    WHERE scope = ? AND tool_version = ? AND key = ?
"""
_HOLDER = """
    SELECT invocation_id, phase, epoch FROM toolbound_ledger
    WHERE scope = ? AND tool_version = ? AND key = ?
"""
# One guarded UPDATE per target phase: the phases that may move to it are PHASE_EDGES's
# (R9), written into the statement as a constant list, so a refused edge changes nothing
# and no read-then-write is needed. Evidence (reconciliation, sweeps) has its own form.
# The holder's epoch, when given, is part of the guard: a holder taken over is fenced.
_ADVANCE = """
    UPDATE toolbound_ledger
    SET phase = ?, updated_us = ?, result = COALESCE(?, result)
    WHERE scope = ? AND tool_version = ? AND key = ? AND invocation_id = ?
      AND epoch = COALESCE(?, epoch) AND phase IN ({sources})
"""
_ADVANCE_WITH_EVIDENCE = """
    UPDATE toolbound_ledger
    SET phase = ?, updated_us = ?, result = COALESCE(?, result),
        evidence = json_insert(evidence, '$[#]', json(?))
    WHERE scope = ? AND tool_version = ? AND key = ? AND invocation_id = ?
      AND epoch = COALESCE(?, epoch) AND phase IN ({sources})
"""
_ADVANCES = {
    target: (_ADVANCE.format(sources=sources), _ADVANCE_WITH_EVIDENCE.format(sources=sources))
    for target, sources in SOURCES_SQL.items()
}
_SWEEP = f"""
    UPDATE toolbound_ledger
    SET phase = {SWEEP_TO},
        epoch = epoch + 1,
        updated_us = ?,
        evidence = json_insert(evidence, '$[#]', json_object({SWEEP_EVIDENCE}))
    WHERE phase IN ({SWEEP_FROM}) AND deadline_us < ?
    RETURNING scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,
              deadline_us, created_us, updated_us, result, evidence, epoch
"""  # noqa: S608 - formatted from rules.ABANDONED, a constant table, never from input
# A takeover is read, judged (rules.taken_over) and written under the write lock.
_TAKE_OVER = """
    UPDATE toolbound_ledger SET phase = ?, updated_us = ?, evidence = ?, epoch = ?
    WHERE scope = ? AND tool_version = ? AND key = ?
"""
_VERSION_DDL = """
    CREATE TABLE toolbound_schema_version (
        version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)
"""

_T = TypeVar("_T")


@dataclass(slots=True, eq=False)
class _Queued:
    """One write waiting for a group commit, and what became of it."""

    work: Callable[[sqlite3.Connection], object]
    statement: bool
    """Atomic on its own (see ``_Storage._grouped``): alone, no ``BEGIN``/``COMMIT`` around it."""
    done: threading.Event = field(default_factory=threading.Event)
    value: object = None
    error: BaseException | None = None


_Row = tuple[str, str, str, str, str, str, bytes, str, str, int, int, int, str | None, str, int]


class _Storage:
    """The file underneath the ledger: connections, the write lock, SQLite's errors.

    A connection per thread, opened and migrated; the write lock and group commit (a
    process's concurrent writers share one transaction and one fsync); every sqlite3
    error mapped to LedgerError.
    """

    path: str
    busy_timeout: float
    synchronous: Synchronous
    _local: threading.local
    _connections: dict[threading.Thread, sqlite3.Connection]
    _connections_lock: threading.Lock
    _write_lock: threading.RLock
    _turns: Turns
    _turn_depth: int
    _queued: list[_Queued]
    _queued_lock: threading.Lock
    _savepoints: itertools.count[int]
    _pid: int
    _closed: bool
    _checkpoints: Checkpoints | None

    def close(self) -> None:
        """Close every connection; the subclass says how."""
        raise NotImplementedError

    def _connection(self) -> sqlite3.Connection:
        check_off_loop("the ledger (SQLite)")
        if self._closed:
            msg = f"{self!r} is closed"
            raise LedgerError(msg, code="storage_unavailable")
        if self._pid != os.getpid():
            self._forget_parent_connections()
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._connections_lock:
            if self._closed:
                msg = f"{self!r} is closed"
                raise LedgerError(msg, code="storage_unavailable")
            # Threads come and go (thread pools shrink): close what the dead ones left.
            for thread in [t for t in self._connections if not t.is_alive()]:
                self._connections.pop(thread).close()
            with self._errors():
                conn = sqlite3.connect(
                    self.path,
                    timeout=self.busy_timeout,
                    isolation_level=None,  # we issue BEGIN IMMEDIATE / COMMIT ourselves
                    check_same_thread=False,  # only so close() may close it from any thread
                )
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                # Checkpoints are the background thread's (see _checkpoints); a writer
                # copies the WAL itself only once it is far past SQLite's default.
                conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_BOUND}")
            self._connections[threading.current_thread()] = conn
        self._local.conn = conn
        return conn

    def _forget_parent_connections(self) -> None:
        # SQLite connections must not cross fork(): a child that used its parent's would
        # corrupt the file's locking. Drop them unclosed (they are the parent's) and start
        # afresh; the write queue is new too, since a lock may have been held at the fork,
        # and the child holds no turn (its Turns opens the lock file anew).
        self._pid = os.getpid()
        self._checkpoints = None  # the parent's thread is not ours; writers checkpoint
        self._local = threading.local()
        self._connections = {}
        self._connections_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._turn_depth = 0
        self._queued = []
        self._queued_lock = threading.Lock()

    def _switch_to_wal(self, conn: sqlite3.Connection) -> object:
        """``PRAGMA journal_mode = WAL``, waiting out other processes opening the file.

        Switching needs an exclusive lock and SQLite answers SQLITE_BUSY at once,
        without its busy handler, when several processes open a new file together:
        it is done in the writers' turn, and retried while a reader holds the file.
        """
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() == "wal":
            return mode
        deadline = time.monotonic() + self.busy_timeout
        with self._writer():
            while True:
                try:
                    (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
                else:
                    return mode

    def _open(self, conn: sqlite3.Connection, *, adopt: bool) -> None:
        """Check the file is ours (or empty), switch to WAL, apply pending migrations."""
        with self._errors():
            tables = _tables(conn)  # the first read: garbage fails here, before any write
            if VERSION_TABLE not in tables:
                if LEDGER_TABLE in tables:
                    msg = (
                        f"{self.path} has a {LEDGER_TABLE} table but no {VERSION_TABLE}: "
                        "not a toolbound ledger, or a damaged one; refusing to touch it"
                    )
                    raise LedgerError(msg, code="corrupt_store")
                foreign = sorted(tables - _INTERNAL_TABLES)
                if foreign and not adopt:
                    msg = (
                        f"{self.path} is another application's SQLite database (tables: "
                        f"{', '.join(foreign[:5])}); refusing to add a ledger to it. Pass "
                        "adopt=True to keep the ledger beside those tables on purpose"
                    )
                    raise LedgerError(msg, code="corrupt_store")
            mode = self._switch_to_wal(conn)
            if str(mode).lower() != "wal":
                msg = f"{self.path} cannot use WAL mode (journal_mode is {mode})"
                raise LedgerError(msg, code="storage_unavailable")
        with self._write(conn):
            # Again under the write lock: another process may have migrated meanwhile.
            tables = _tables(conn)
            current = 0
            if VERSION_TABLE in tables:
                try:
                    (found,) = conn.execute(
                        "SELECT max(version) FROM toolbound_schema_version"
                    ).fetchone()
                except sqlite3.OperationalError as exc:
                    msg = f"{self.path}: {VERSION_TABLE} is not toolbound's version table"
                    raise LedgerError(msg, code="corrupt_store") from exc
                current = int(found or 0)
            else:
                conn.execute(_VERSION_DDL)
            for migration in pending(current, where=self.path):
                for statement in migration.statements("sqlite"):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO toolbound_schema_version VALUES (?, ?, ?)",
                    (migration.version, migration.description, datetime.now(UTC).isoformat()),
                )
            columns = {r[1] for r in conn.execute("PRAGMA table_info(toolbound_ledger)")}
            if not columns >= _EXPECTED_COLUMNS:
                missing = ", ".join(sorted(_EXPECTED_COLUMNS - columns))
                msg = f"{self.path}: {LEDGER_TABLE} lacks columns {missing}; damaged ledger"
                raise LedgerError(msg, code="corrupt_store")

    @contextmanager
    def _write(
        self, conn: sqlite3.Connection | None = None, *, ours: bool = True
    ) -> Iterator[sqlite3.Connection]:
        """A write transaction holding SQLite's write lock from its first statement.

        Inside :meth:`atomic` on this thread, join the open transaction instead.
        ``ours=False``: the block is the caller's code, whose errors pass unchanged.
        """
        conn = self._connection() if conn is None else conn
        if conn.in_transaction:
            with self._errors():
                yield conn
            return
        with self._writer():
            with self._errors():
                conn.execute("BEGIN IMMEDIATE")
            try:
                with self._errors() if ours else nullcontext():
                    yield conn
            except BaseException:
                self._rollback(conn)
                raise
            try:
                with self._errors():
                    conn.execute("COMMIT")
            except BaseException:
                self._rollback(conn)  # R9: a phase not committed is not reported as recorded
                raise

    def _grouped(self, work: Callable[[sqlite3.Connection], _T], *, statement: bool = False) -> _T:
        """Run one write, committed together with the writes other threads queued meanwhile.

        Group commit: a writer queues its work, then waits for the write lock. Whoever
        gets the lock takes every queued write and commits them in one transaction, one
        fsync; the others find theirs done when the lock comes to them. Each write runs
        in its own savepoint, so one that fails (a refused edge) is undone alone and its
        error raised in its own thread; if the transaction fails, every write in it gets
        that error and none is recorded (R9: never reported as recorded when it is not).
        Inside :meth:`atomic` the write joins that transaction; at ``NORMAL`` (no fsync
        to share) each write is its own transaction, still in the queue and its turn.
        ``statement``: alone (outside any transaction) ``work`` keeps itself atomic, so
        it runs without ``BEGIN``/``COMMIT`` around it: it is one statement, atomic on
        its own, or opens its own transaction when it needs more than one (a claim on a
        taken key).
        """
        conn = self._connection()
        if conn.in_transaction:
            with self._write(conn) as joined:
                return work(joined)
        if self.synchronous == "NORMAL":
            with self._writer():
                return self._alone(conn, work, statement=statement)
        lock = self._write_lock
        if lock.acquire(blocking=False):
            # No commit under way: lead at once. The queue is nearly always empty then,
            # and a write alone needs no queue entry, no event and no savepoint.
            try:
                with self._turn(time.monotonic() + self.busy_timeout):
                    with self._queued_lock:
                        group, self._queued = self._queued, []
                    if not group:
                        return self._alone(conn, work, statement=statement)
                    queued = _Queued(work, statement)
                    self._commit_group(conn, [*group, queued])
            finally:
                lock.release()
            if queued.error is not None:
                raise queued.error
            return queued.value  # type: ignore[return-value]  # what work returned
        queued = _Queued(work, statement)
        with self._queued_lock:
            self._queued.append(queued)
        try:
            with self._writer():
                if not queued.done.is_set():
                    with self._queued_lock:
                        group, self._queued = self._queued, []
                    self._commit_group(conn, group)
        except LedgerError:
            with self._queued_lock:
                if queued in self._queued:  # never taken: nothing was written
                    self._queued.remove(queued)
                    raise
            # A group holding it is committing: its outcome is this write's.
            queued.done.wait()
        if queued.error is not None:
            raise queued.error
        return queued.value  # type: ignore[return-value]  # what work returned

    def _alone(
        self, conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], _T], *, statement: bool
    ) -> _T:
        """Run one write in its own transaction (the caller holds the queue and the turn)."""
        if statement:
            with self._errors():
                return work(conn)
        with self._write(conn) as joined:
            return work(joined)

    def _commit_group(self, conn: sqlite3.Connection, group: list[_Queued]) -> None:
        """One transaction for ``group`` (the caller holds the queue and the turn)."""
        try:
            if len(group) == 1 and group[0].statement:
                with self._errors():
                    group[0].value = group[0].work(conn)
                return
            with self._write(conn):
                if len(group) == 1:
                    group[0].value = group[0].work(conn)
                else:
                    for queued in group:
                        self._run_queued(conn, queued)
        except BaseException as exc:
            error = exc
            if not isinstance(exc, Exception):  # interrupted: only this thread sees that
                error = LedgerError(
                    f"ledger {self.path}: interrupted before commit", code="storage_unavailable"
                )
            for queued in group:
                if queued.error is None:
                    queued.value, queued.error = None, error
            if not isinstance(exc, Exception):
                raise
        finally:
            for queued in group:
                queued.done.set()

    def _run_queued(self, conn: sqlite3.Connection, queued: _Queued) -> None:
        conn.execute("SAVEPOINT toolbound_grouped")
        try:
            queued.value = queued.work(conn)
        except Exception as exc:
            error: Exception = exc
            if isinstance(exc, sqlite3.Error):
                error = _map_error(exc, self.path)
                error.__cause__ = exc
            queued.error = error
            if not conn.in_transaction:
                raise  # SQLite rolled the whole transaction back (it does on SQLITE_FULL)
            conn.execute("ROLLBACK TO toolbound_grouped")
        conn.execute("RELEASE toolbound_grouped")

    @contextmanager
    def _writer(self) -> Iterator[None]:
        """The process's writers queue, then take their turn on the file (re-entrant).

        SQLite's busy handler polls with growing sleeps (1 ms, 2 ms, 5 ms, … 100 ms).
        When each commit holds the write lock through an fsync, threads waiting on it
        oversleep and can starve; a queue wakes the next writer at once. Between
        processes (replicas on one file) the writer at the head of the queue then takes
        its turn on the file's lock (:class:`~toolbound._wal.Turns`), tried again within
        half a millisecond; the two waits are bounded by ``busy_timeout`` together.
        Measured with bench_ledger's ledger write, 8 threads, over several runs on a
        shared 2-core VM: FULL 10-37% faster queued. Without the fsync (``NORMAL``) the
        lock is held for microseconds and the queue's hand-offs cost more than they
        save (30-40% slower queued, one process). ``NORMAL`` queues all the same: an
        flock is the open file's, not a thread's, so a turn needs the process's writers
        serialized first. Measured with the same write, 3 runs: one process, 8 threads,
        NORMAL with the queue and turns 6,600-8,100 writes/s against 7,800-11,100
        without; two processes on one file, 8 threads each, p99 22-33 ms against
        35-42 ms, the two together 5,500-9,700 writes/s against 7,400-9,100. At FULL,
        without turns one of two processes starved in three runs of six (34-368
        writes/s, p99 0.45-1.9 s); with turns their shares stayed even, p99 16-112 ms.
        Reads never queue (WAL).
        """
        deadline = time.monotonic() + self.busy_timeout
        if not self._write_lock.acquire(timeout=self.busy_timeout):
            msg = f"ledger {self.path}: still locked by another writer after busy_timeout"
            raise _unavailable(msg)
        try:
            with self._turn(deadline):
                yield
        finally:
            self._write_lock.release()

    @contextmanager
    def _turn(self, deadline: float) -> Iterator[None]:
        """The process's turn on the file, for the holder of the write queue.

        Re-entrant like the queue: a write that opens its own transaction inside
        another (a claim on a taken key, a group's commit) keeps the turn, and only the
        outermost holder gives it, after its ``COMMIT`` or ``ROLLBACK``.
        """
        if self._turn_depth == 0:
            refused = self._turns.take(deadline)
            if refused is not None:
                msg = f"ledger {self.path}: {refused}"
                raise _unavailable(msg)
        self._turn_depth += 1
        try:
            yield
        finally:
            self._turn_depth -= 1
            if self._turn_depth == 0:
                self._turns.give()

    def _rollback(self, conn: sqlite3.Connection) -> None:
        # SQLite may already have rolled back (it does on SQLITE_FULL): only end what is open.
        if not conn.in_transaction:
            return
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            # A connection we cannot reset is not reused: the next call opens a fresh one.
            with self._connections_lock:
                self._connections.pop(threading.current_thread(), None)
            self._local.conn = None
            conn.close()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise _map_error(exc, self.path) from exc


class SQLiteLedger(_Storage):
    """A :class:`~toolbound.ledger.store.Ledger` in one SQLite file (WAL).

    Safe from several threads (a connection each) and several processes (the write
    lock is taken with ``BEGIN IMMEDIATE`` before any record is read for a write).

    Opening applies the versioned migrations of :mod:`toolbound.ledger.migrations`.
    A file that is not SQLite, or belongs to another application, raises
    ``LedgerError(code="corrupt_store")``; one written by a newer toolbound raises
    ``unsupported_schema``. Neither is ever reinitialised. ``adopt=True`` allows
    adding the ledger to an existing application database, so business tables and
    ledger records can commit in one transaction (R8) — see :meth:`atomic`.

    ``synchronous`` is ``"FULL"`` by default: each phase is fsynced before the call
    returns (R9). ``"NORMAL"`` survives a process crash but not a power cut; see the
    module docstring.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention: timedelta = timedelta(days=1),
        expired: ExpiredPolicy = "reject",
        busy_timeout: float = 5.0,
        synchronous: Synchronous = "FULL",
        adopt: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        if self.path == ":memory:" or self.path.startswith("file::memory:") or not self.path:
            msg = "SQLiteLedger needs a file (each thread has its own connection); use MemoryLedger"
            raise ConfigurationError(msg)
        if synchronous not in ("FULL", "EXTRA", "NORMAL"):
            msg = f"synchronous must be FULL, EXTRA or NORMAL (R9: never OFF), not {synchronous!r}"
            raise ConfigurationError(msg)
        self.retention = retention
        self.expired: ExpiredPolicy = validate_settings(retention, expired)
        self.busy_timeout = busy_timeout
        self.synchronous: Synchronous = synchronous
        self._local = threading.local()
        self._connections: dict[threading.Thread, sqlite3.Connection] = {}
        self._connections_lock = threading.Lock()
        self._write_lock = threading.RLock()
        self._turns = Turns(self.path)
        self._turn_depth = 0
        self._queued: list[_Queued] = []
        self._queued_lock = threading.Lock()
        self._savepoints = itertools.count()
        self._pid = os.getpid()
        self._closed = False
        self._checkpoints = None
        conn = self._connection()
        try:
            self._open(conn, adopt=adopt)
        except BaseException:
            self.close()
            raise
        self._checkpoints = Checkpoints(self.path, synchronous=synchronous, owner="ledger")

    # -- the protocol -----------------------------------------------------------------

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """See :meth:`Ledger.claim`. The intent is fsynced before ``Claimed`` returns."""
        return self._grouped(lambda conn: self._claim(conn, intent, now=now), statement=True)

    def claim_executing(self, intent: Intent, *, now: datetime) -> Claim:
        """See :meth:`Ledger.claim_executing`. One transaction, one fsync."""
        return self._grouped(
            lambda conn: self._claim(conn, intent, now=now, phase="executing"), statement=True
        )

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        """See :meth:`Ledger.advance`. One guarded ``UPDATE``: atomic on its own."""
        self._grouped(
            statement=True,
            work=lambda conn: self._advance(
                conn,
                key,
                invocation_id=invocation_id,
                phase=phase,
                now=now,
                result=result,
                evidence=evidence,
                epoch=epoch,
            ),
        )

    def take_over(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        now: datetime,
        evidence: Mapping[str, object] | None = None,
    ) -> LedgerRecord:
        """See :meth:`Ledger.take_over`. Read and written under the write lock."""
        with self._write() as conn:
            row = conn.execute(_GET, _pk(key)).fetchone()
            taken = taken_over(
                None if row is None else _record(row),
                key,
                invocation_id=invocation_id,
                now=now,
                evidence=evidence,
            )
            columns = _columns(taken)
            conn.execute(
                _TAKE_OVER,
                (
                    taken.phase,
                    columns["updated_us"],
                    columns["evidence"],
                    taken.epoch,
                    *_pk(key),
                ),
            )
        return taken

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        """See :meth:`Ledger.get`."""
        with self._errors():
            row = self._connection().execute(_GET, _pk(key)).fetchone()
        return None if row is None else _record(row)

    def find(self, invocation_id: str) -> LedgerRecord | None:
        """See :meth:`Ledger.find`."""
        with self._errors():
            row = self._connection().execute(_FIND, (invocation_id,)).fetchone()
        return None if row is None else _record(row)

    def unresolved(self) -> list[LedgerRecord]:
        """See :meth:`Ledger.unresolved`. Oldest first; ties in insertion order."""
        with self._errors():
            rows = self._connection().execute(_UNRESOLVED).fetchall()
        return [_record(r) for r in rows]

    def sweep(self, *, now: datetime, grace: timedelta) -> list[LedgerRecord]:
        """See :meth:`Ledger.sweep`. One ``UPDATE … RETURNING`` under the write lock."""
        cutoff = to_micros(abandoned_before(now, grace))
        with self._write() as conn:
            rows = conn.execute(_SWEEP, (to_micros(now), cutoff)).fetchall()
        return [_record(r) for r in rows]

    @contextmanager
    def atomic(self) -> Iterator[SQLiteTransaction]:
        """One SQLite transaction for ledger records and the tool's own rows (R8).

        ``BEGIN IMMEDIATE`` takes the write lock for the whole block, so keep it short.
        Business rows written through ``tx.connection`` commit with the records, or an
        exception rolls all of them back. Ledger calls made on this thread inside the
        block join it; a nested ``atomic()`` is a savepoint. Errors the block raises (a
        tool's own ``sqlite3`` errors included) pass through unchanged; a failed commit
        raises ``LedgerError``.
        """
        conn = self._connection()
        if conn.in_transaction:
            name = f"toolbound_{next(self._savepoints)}"
            with self._errors():
                conn.execute(f"SAVEPOINT {name}")
            try:
                yield SQLiteTransaction(self, conn)
            except BaseException:
                with self._errors():
                    conn.execute(f"ROLLBACK TO {name}")
                    conn.execute(f"RELEASE {name}")
                raise
            with self._errors():
                conn.execute(f"RELEASE {name}")
            return
        with self._write(conn, ours=False) as conn_in_tx:
            yield SQLiteTransaction(self, conn_in_tx)

    def close(self) -> None:
        """Close every thread's connection. Later calls raise ``storage_unavailable``."""
        with self._connections_lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
            checkpoints, self._checkpoints = self._checkpoints, None
        if checkpoints is not None:
            checkpoints.stop()
        for conn in connections:
            conn.close()
        self._turns.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteLedger({self.path!r}, synchronous={self.synchronous!r})"

    # -- the work, on a given connection ------------------------------------------------

    def _claim(
        self, conn: sqlite3.Connection, intent: Intent, *, now: datetime, phase: Phase = "intent"
    ) -> Claim:
        """Claim on ``conn``, inside an open write transaction or alone.

        ``phase``: the phase a ``Claimed`` record opens in (``rules.OPENING``). A free key
        is the one ``INSERT``, atomic and durable on its own, so alone it needs no
        ``BEGIN``/``COMMIT``; a taken key is read and judged under the write lock.
        """
        fresh = intent_record(intent, now=now, phase=phase)
        if conn.execute(_INSERT, _columns(fresh)).rowcount == 1:
            return Claimed(epoch=fresh.epoch)  # R8: the key was free (decide_claim's answer)
        if conn.in_transaction:
            return self._claim_taken(conn, intent, now=now, phase=phase)
        with self._write(conn):
            return self._claim_taken(conn, intent, now=now, phase=phase)

    def _claim_taken(
        self, conn: sqlite3.Connection, intent: Intent, *, now: datetime, phase: Phase
    ) -> Claim:
        """The key holds a record: answer R8, maybe overwrite it (under the write lock)."""
        # The ledger never deletes a record, so the one the INSERT met is still there.
        digest, holder, current, created_us, result, epoch = conn.execute(
            _LOOKUP, _pk(intent.key)
        ).fetchone()
        existing = Existing(
            digest=digest,
            invocation_id=holder,
            phase=current,
            created_at=from_micros(created_us),
            result=loads_result(result),
            epoch=epoch,
        )
        decision = decide_claim(
            intent, existing, now=now, retention=self.retention, expired=self.expired, phase=phase
        )
        if decision.write is not None:
            conn.execute(_OVERWRITE, _columns(decision.write))
        return decision.answer

    def _advance(
        self,
        conn: sqlite3.Connection,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None,
        evidence: Mapping[str, object] | None,
        epoch: int | None = None,
    ) -> None:
        stored = None if result is None else dumps_result(result)
        plain, with_evidence = _ADVANCES[phase]
        where = (*_pk(key), invocation_id, epoch)
        if evidence is None:
            changed = conn.execute(plain, (phase, to_micros(now), stored, *where)).rowcount
        else:
            proof = dumps(dict(evidence))
            changed = conn.execute(
                with_evidence, (phase, to_micros(now), stored, proof, *where)
            ).rowcount
        if changed == 1:
            return
        row = conn.execute(_HOLDER, _pk(key)).fetchone()
        holder, current, held = (None, None, None) if row is None else row
        explain_refused_advance(
            key,
            invocation_id=invocation_id,
            target=phase,
            holder=holder,
            current=current,
            epoch=epoch,
            held=held,
        )

    # -- connections, transactions, errors --------------------------------------------


class SQLiteTransaction:
    """What :meth:`SQLiteLedger.atomic` yields: its connection, claim and advance."""

    __slots__ = ("_conn", "_ledger")

    def __init__(self, ledger: SQLiteLedger, conn: sqlite3.Connection) -> None:
        self._ledger = ledger
        self._conn = conn

    @property
    def connection(self) -> sqlite3.Connection:
        """The connection of this transaction: write business rows through it.

        Do not call ``commit()`` on it; leaving the ``with`` block commits.
        """
        return self._conn

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """:meth:`SQLiteLedger.claim` inside this transaction."""
        with self._ledger._errors():  # noqa: SLF001 - the transaction is part of the store
            return self._ledger._claim(self._conn, intent, now=now)  # noqa: SLF001

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        """:meth:`SQLiteLedger.advance` inside this transaction."""
        with self._ledger._errors():  # noqa: SLF001
            self._ledger._advance(  # noqa: SLF001
                self._conn,
                key,
                invocation_id=invocation_id,
                phase=phase,
                now=now,
                result=result,
                evidence=evidence,
                epoch=epoch,
            )


# -- rows and errors -----------------------------------------------------------------


def _pk(key: LedgerKey) -> tuple[str, str, str]:
    return (key.scope, key.tool_version, key.key)


def _columns(record: LedgerRecord) -> dict[str, object]:
    """``record`` as this store's columns: the inverse of :func:`_record`."""
    return {
        "scope": record.key.scope,
        "tool_version": record.key.tool_version,
        "key": record.key.key,
        "digest": record.digest,
        "invocation_id": record.invocation_id,
        "tool": record.tool,
        "canonical": record.canonical,
        "subject": dumps(dict(record.subject)),
        "phase": record.phase,
        "deadline_us": to_micros(record.deadline),
        "created_us": to_micros(record.created_at),
        "updated_us": to_micros(record.updated_at),
        "result": None if record.result is None else dumps_result(record.result),
        "evidence": dumps([dict(e) for e in record.evidence]),
        "epoch": record.epoch,
    }


def _record(row: _Row) -> LedgerRecord:
    (scope, version, key, digest, holder, tool, canonical, subject, phase, *_) = row
    deadline_us, created_us, updated_us, result, evidence, epoch = row[9:]
    return LedgerRecord(
        key=LedgerKey(scope, version, key),
        digest=digest,
        invocation_id=holder,
        tool=tool,
        canonical=bytes(canonical),
        subject=json.loads(subject),
        phase=phase,  # type: ignore[arg-type]  # CHECK constraint keeps it a Phase
        deadline=from_micros(deadline_us),
        created_at=from_micros(created_us),
        updated_at=from_micros(updated_us),
        result=loads_result(result),
        evidence=loads_evidence(evidence),
        epoch=int(epoch),
    )


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _unavailable(msg: str) -> LedgerError:
    """A writer that waited ``busy_timeout`` in vain: as SQLite's own ``SQLITE_BUSY`` is."""
    error = LedgerError(msg, code="storage_unavailable")
    error.recoverable = True
    return error


def _map_error(exc: sqlite3.Error, path: str) -> LedgerError:
    """R19: storage errors leave the store as LedgerError with a machine-readable code."""
    primary = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if primary == sqlite3.SQLITE_FULL:
        code, what = "storage_full", "the database or disk is full; nothing was written"
    elif primary in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
        code, what = "corrupt_store", "not a SQLite database, or a damaged one; left untouched"
    elif primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        code, what = "storage_unavailable", "still locked by another writer after busy_timeout"
    else:
        code, what = "storage_unavailable", "SQLite failed"
    error = LedgerError(f"ledger {path}: {what} ({exc})", code=code)
    error.recoverable = code in ("storage_unavailable", "storage_full")
    return error
