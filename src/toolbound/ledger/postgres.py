"""The ledger in PostgreSQL: several runtime replicas, one ledger (R8, R9, R19).

Needs the ``postgres`` extra (``pip install 'toolbound[postgres]'``): psycopg 3 and
psycopg_pool.

Durability is PostgreSQL's: a phase is recorded when its transaction commits, which with
the server defaults (``fsync=on``, ``synchronous_commit=on``) means the WAL is flushed
before :meth:`PostgresLedger.claim` or :meth:`PostgresLedger.advance` returns (R9: each
phase durable before the next step). A server run with ``synchronous_commit=off`` can lose
the last few hundred milliseconds of commits in a crash, like SQLite's ``NORMAL``.

Concurrency: a claim is one ``INSERT … ON CONFLICT DO NOTHING`` (its own transaction) in
the common case of a free key. When the key is taken, the row is read with
``SELECT … FOR UPDATE`` and, if R8 says it may be replaced (a failed call with the same
digest, or an expired record under ``expired="new"``), overwritten in the same
transaction. An advance is one guarded ``UPDATE`` whose ``WHERE`` is the transition table.
Two replicas racing a key therefore serialize on the row and exactly one is
:class:`~toolbound.ledger.store.Claimed`.

Statements: outside :meth:`PostgresLedger.atomic` the claim's ``INSERT`` and the
advance's ``UPDATE`` are prepared once per pooled session and run by name through libpq
(:mod:`toolbound.ledger._pgexec`): a write's CPU is then little more than its two
round trips, which is what lets several callers share one runtime.

Errors: psycopg errors are mapped at this boundary to
:class:`~toolbound.ledger.store.LedgerError`: ``storage_unavailable`` (connection lost,
server down, pool exhausted), ``storage_full`` (the server's disk is full),
``corrupt_store`` (the ledger table is missing, altered or damaged), and
``unsupported_schema`` (written by a newer toolbound).

Text: a session may use any client encoding (``client_encoding`` in the connection
string). What the ledger sends is encoded in it, and its ``json`` and ``jsonb`` columns
are read back in it too: psycopg's own JSON loader takes the bytes as UTF-8 whatever
the session's encoding, so the ledger's connections load JSON with a loader of
their own that decodes it first.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, Self

from toolbound._errors import ConfigurationError
from toolbound._loopguard import check_off_loop
from toolbound.ledger._pgexec import Param, Statement, Statements
from toolbound.ledger._sql import (
    SOURCES_SQL,
    SWEEP_EVIDENCE,
    SWEEP_FROM,
    SWEEP_TO,
    dumps,
    explain_refused_advance,
    require_aware,
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
    result_from_json,
)

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg.adapt import Loader
    from psycopg.conninfo import conninfo_to_dict
    from psycopg_pool import ConnectionPool

    from toolbound import _pgcheck
    from toolbound._pgcheck import Outage, Returns
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "PostgresLedger needs psycopg 3 and psycopg_pool: pip install 'toolbound[postgres]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from types import TracebackType

    from psycopg.abc import Buffer
    from psycopg.rows import TupleRow

    from toolbound._model import Result
    from toolbound.ledger.store import Intent, Phase

    Connection = psycopg.Connection[TupleRow]

__all__ = ["PostgresLedger", "PostgresTransaction"]

_MIGRATION_LOCK = 0x746F6F6C626F756E  # "toolboun": one advisory lock id for schema changes

FRESH: Final = _pgcheck.FRESH
"""Seconds after a call during which its connection is handed out again without a round
trip, if nothing has arrived on its socket since (see :class:`PostgresLedger`)."""

_COLUMNS = (
    "scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,"
    " deadline, created_at, updated_at, result, evidence, epoch"
)
_SELECT = """
    SELECT scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,
           deadline, created_at, updated_at, result, evidence, epoch
    FROM toolbound_ledger
"""
_GET = _SELECT + " WHERE scope = %s AND tool_version = %s AND key = %s"
_FIND = _SELECT + " WHERE invocation_id = %s ORDER BY seq LIMIT 1"
_UNRESOLVED = _SELECT + " WHERE phase = 'unknown' ORDER BY created_at, seq"
# A claim writes the record rules.decide_claim hands it, as _columns puts it: the
# parameters are the columns in _COLUMNS order.
_INSERT = Statement.named(
    "claim",
    """
    INSERT INTO toolbound_ledger (
        scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,
        deadline, created_at, updated_at, result, evidence, epoch)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8::json, $9, $10, $11, $12, $13::json, $14::jsonb,
            $15)
    ON CONFLICT (scope, tool_version, key) DO NOTHING
""",
)
_LOCK_ROW = """
    SELECT digest, invocation_id, phase, created_at, result, epoch FROM toolbound_ledger
    WHERE scope = %s AND tool_version = %s AND key = %s
    FOR UPDATE
"""
_OVERWRITE = Statement.named(
    "overwrite",
    """
    UPDATE toolbound_ledger
    SET digest = $4, invocation_id = $5, tool = $6, canonical = $7, subject = $8::json,
        phase = $9, deadline = $10, created_at = $11, updated_at = $12, result = $13::json,
        evidence = $14::jsonb, epoch = $15
    WHERE scope = $1 AND tool_version = $2 AND key = $3
""",
)
# One guarded UPDATE per target phase: the phases that may move to it are PHASE_EDGES's
# (R9), written into the statement as a constant list, so a refused edge changes nothing
# and a single statement needs no read-then-write. Evidence (reconciliation, sweeps) has
# its own form. The holder's epoch, when given, is part of the guard: a holder taken
# over is fenced.
_ADVANCE = """
    UPDATE toolbound_ledger
    SET phase = $1, updated_at = $2, result = COALESCE($3::json, result)
    WHERE scope = $4 AND tool_version = $5 AND key = $6 AND invocation_id = $7
      AND epoch = COALESCE($8::bigint, epoch) AND phase IN ({sources})
"""
_ADVANCE_WITH_EVIDENCE = """
    UPDATE toolbound_ledger
    SET phase = $1, updated_at = $2, result = COALESCE($3::json, result),
        evidence = evidence || $9::jsonb
    WHERE scope = $4 AND tool_version = $5 AND key = $6 AND invocation_id = $7
      AND epoch = COALESCE($8::bigint, epoch) AND phase IN ({sources})
"""
_ADVANCES = {
    target: (
        Statement.named(f"advance_{target}", _ADVANCE.format(sources=sources)),
        Statement.named(
            f"advance_{target}_evidence",
            _ADVANCE_WITH_EVIDENCE.format(sources=sources),
        ),
    )
    for target, sources in SOURCES_SQL.items()
}
_HOLDER = """
    SELECT invocation_id, phase, epoch FROM toolbound_ledger
    WHERE scope = %s AND tool_version = %s AND key = %s
"""
# The sweep's rule is rules.ABANDONED, put in SQL by _sql (constants, never input).
_SWEEP = f"""
    UPDATE toolbound_ledger
    SET phase = {SWEEP_TO},
        epoch = epoch + 1,
        updated_at = %s,
        evidence = evidence || jsonb_build_array(jsonb_build_object({SWEEP_EVIDENCE}))
    WHERE phase IN ({SWEEP_FROM}) AND deadline < %s
    RETURNING scope, tool_version, key, digest, invocation_id, tool, canonical, subject, phase,
              deadline, created_at, updated_at, result, evidence, epoch
"""  # noqa: S608 - formatted from rules.ABANDONED, a constant table, never from input
# A takeover is read under the row lock, judged (rules.taken_over) and written.
_LOCK_RECORD = _SELECT + " WHERE scope = %s AND tool_version = %s AND key = %s FOR UPDATE"
_TAKE_OVER = """
    UPDATE toolbound_ledger SET phase = %s, updated_at = %s, evidence = %s::jsonb, epoch = %s
    WHERE scope = %s AND tool_version = %s AND key = %s
"""
_VERSION_DDL = """
    CREATE TABLE toolbound_schema_version (
        version integer PRIMARY KEY, description text NOT NULL, applied_at timestamptz NOT NULL)
"""
_EXPECTED_COLUMNS = frozenset(c.strip() for c in _COLUMNS.split(","))


class PostgresLedger:
    """A :class:`~toolbound.ledger.store.Ledger` in a PostgreSQL database.

    ``conninfo`` is a libpq connection string or URI. The ledger lives in the table
    ``toolbound_ledger`` of the connection's current schema (the first one on its
    ``search_path``), beside ``toolbound_schema_version``; opening applies pending
    migrations under an advisory lock, so replicas starting together do not race.

    Connections come from a :class:`psycopg_pool.ConnectionPool` of at most
    ``pool_size``. ``timeout`` bounds the wait for a connection, at start and on each
    call. With ``check_connections`` (the default) each connection is checked when it
    is taken from the pool, so one the server dropped while idle (a restart, a
    failover) is replaced rather than failing the call — an ``advance`` that failed
    that way after a side effect would leave the call to reconciliation. The check is
    a round trip (an empty query) for a connection idle longer than :data:`FRESH`
    seconds, or one on whose socket something has arrived since its last call (a
    server that drops a connection says so, and closes it). A connection back from a
    call moments ago, with nothing waiting on its socket, is as sound as that call
    found it: it is handed out without the round trip, which would cost a busy ledger
    two of its four round trips per write. ``check_connections=False`` checks nothing,
    and then each dropped connection fails one call with ``storage_unavailable``
    before the pool replaces it.
    """

    def __init__(
        self,
        conninfo: str,
        *,
        retention: timedelta = timedelta(days=1),
        expired: ExpiredPolicy = "reject",
        pool_size: int = 8,
        timeout: float = 10.0,
        check_connections: bool = True,
    ) -> None:
        if pool_size < 1:
            msg = f"pool_size must be at least 1, not {pool_size}"
            raise ConfigurationError(msg)
        self.retention = retention
        self.expired: ExpiredPolicy = validate_settings(retention, expired)
        self._local = threading.local()
        self._statements = Statements()
        settings: dict[str, object] = {"autocommit": True}
        try:
            given = conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            msg = f"not a PostgreSQL connection string: {exc}"
            raise ConfigurationError(msg) from exc
        if "application_name" not in given:
            # So operators (and the fault tests) can tell the ledger's sessions apart.
            settings["application_name"] = "toolbound-ledger"
        self._where = f"PostgreSQL database {given.get('dbname', '')!s}".rstrip()
        self._returned = Returns()
        self._outage = Outage()
        self._timeout = timeout
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            conninfo,
            kwargs=settings,
            min_size=1,
            max_size=pool_size,
            timeout=timeout,
            # No backoff: a request finds a server down at once, and back within
            # a quarter of a second (toolbound._pgcheck.Outage).
            reconnect_timeout=0,
            reconnect_failed=self._outage.connect_failed,
            check=self._check if check_connections else None,
            configure=_configure,
            name="toolbound-ledger",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            self._migrate()
        except BaseException as exc:
            self._pool.close()
            if isinstance(exc, psycopg.Error):
                raise _map_error(exc, self._where) from exc
            raise

    # -- the protocol -----------------------------------------------------------------

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """See :meth:`Ledger.claim`. The intent is committed before ``Claimed`` returns."""
        with _Borrowed(self) as (conn, joined):
            return self._claim(conn, intent, now=now, in_transaction=joined)

    def claim_executing(self, intent: Intent, *, now: datetime) -> Claim:
        """See :meth:`Ledger.claim_executing`. A free key: one ``INSERT``, one commit."""
        with _Borrowed(self) as (conn, joined):
            return self._claim(conn, intent, now=now, in_transaction=joined, phase="executing")

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
        with _Borrowed(self) as (conn, joined):
            self._advance(
                conn,
                key,
                invocation_id=invocation_id,
                phase=phase,
                now=now,
                result=result,
                evidence=evidence,
                in_transaction=joined,
                epoch=epoch,
            )

    def take_over(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        now: datetime,
        evidence: Mapping[str, object] | None = None,
    ) -> LedgerRecord:
        """See :meth:`Ledger.take_over`. Read ``FOR UPDATE``, judged, written: one transaction."""
        with _Borrowed(self) as (conn, _), conn.transaction():
            row = conn.execute(_LOCK_RECORD, _pk(key)).fetchone()
            taken = taken_over(
                None if row is None else _record(row),
                key,
                invocation_id=invocation_id,
                now=require_aware(now),
                evidence=evidence,
            )
            proof = dumps([dict(e) for e in taken.evidence])
            conn.execute(_TAKE_OVER, (taken.phase, now, proof, taken.epoch, *_pk(key)))
        return taken

    def get(self, key: LedgerKey) -> LedgerRecord | None:
        """See :meth:`Ledger.get`."""
        with _Borrowed(self) as (conn, _):
            row = conn.execute(_GET, _pk(key)).fetchone()
        return None if row is None else _record(row)

    def find(self, invocation_id: str) -> LedgerRecord | None:
        """See :meth:`Ledger.find`."""
        with _Borrowed(self) as (conn, _):
            row = conn.execute(_FIND, (invocation_id,)).fetchone()
        return None if row is None else _record(row)

    def unresolved(self) -> list[LedgerRecord]:
        """See :meth:`Ledger.unresolved`. Oldest first; ties in insertion order."""
        with _Borrowed(self) as (conn, _):
            rows = conn.execute(_UNRESOLVED).fetchall()
        return [_record(r) for r in rows]

    def sweep(self, *, now: datetime, grace: timedelta) -> list[LedgerRecord]:
        """See :meth:`Ledger.sweep`. One ``UPDATE … RETURNING``; replicas may sweep at once."""
        cutoff = abandoned_before(require_aware(now), grace)
        with _Borrowed(self) as (conn, _):
            rows = conn.execute(_SWEEP, (now, cutoff)).fetchall()
        return [_record(r) for r in rows]

    @contextmanager
    def atomic(self) -> Iterator[PostgresTransaction]:
        """One PostgreSQL transaction for ledger records and the tool's own rows (R8).

        Business rows written through ``tx.connection`` commit with the records, or an
        exception rolls all of them back. Ledger calls made on this thread inside the
        block join it; a nested ``atomic()`` is a savepoint. Errors the block raises
        (a tool's own ``psycopg`` errors included) pass through unchanged; a failed
        commit raises ``LedgerError``.
        """
        outer: Connection | None = getattr(self._local, "conn", None)
        conn = outer if outer is not None else self._checkout()
        in_body = False
        try:
            with conn.transaction():
                in_body = True
                self._local.conn = conn
                try:
                    yield PostgresTransaction(self, conn)
                finally:
                    self._local.conn = outer
                in_body = False
        except psycopg.Error as exc:
            if not in_body:  # BEGIN or COMMIT failed: nothing was recorded
                raise _map_error(exc, self._where) from exc
            raise
        finally:
            if outer is None:
                self._put_back(conn)

    def close(self) -> None:
        """Close the pool and its connections."""
        self._pool.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the work, on a given connection ------------------------------------------------

    def _claim(
        self,
        conn: Connection,
        intent: Intent,
        *,
        now: datetime,
        in_transaction: bool,
        phase: Phase = "intent",
    ) -> Claim:
        """Claim on ``conn``; a ``Claimed`` record opens in ``phase`` (``rules.OPENING``)."""
        fresh = intent_record(intent, now=now, phase=phase)
        if self._statements.run(conn, _INSERT, _columns(fresh), joined=in_transaction) == 1:
            # R8: the key was free (decide_claim's answer for no record). The common
            # case: one statement, one commit.
            return Claimed(epoch=fresh.epoch)
        if in_transaction:
            return self._claim_taken(conn, intent, now=now, phase=phase)
        with conn.transaction():
            return self._claim_taken(conn, intent, now=now, phase=phase)

    def _claim_taken(
        self, conn: Connection, intent: Intent, *, now: datetime, phase: Phase
    ) -> Claim:
        """The key has a committed record: lock it, answer R8, maybe overwrite it."""
        # ON CONFLICT waited for any transaction inserting this key, so the row is there.
        digest, holder, current, created_at, result, epoch = _one(
            conn.execute(_LOCK_ROW, _pk(intent.key)).fetchone(), intent.key
        )
        existing = Existing(
            digest=digest,
            invocation_id=holder,
            phase=current,
            created_at=created_at,
            result=None if result is None else result_from_json(result),
            epoch=epoch,
        )
        decision = decide_claim(
            intent, existing, now=now, retention=self.retention, expired=self.expired, phase=phase
        )
        if decision.write is not None:
            self._statements.run(conn, _OVERWRITE, _columns(decision.write), joined=True)
        return decision.answer

    def _advance(
        self,
        conn: Connection,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None,
        evidence: Mapping[str, object] | None,
        in_transaction: bool,
        epoch: int | None = None,
    ) -> None:
        stored = None if result is None else dumps_result(result)
        plain, with_evidence = _ADVANCES[phase]
        params: tuple[Param, ...] = (
            phase,
            require_aware(now),
            stored,
            key.scope,
            key.tool_version,
            key.key,
            invocation_id,
            epoch,
        )
        if evidence is None:
            changed = self._statements.run(conn, plain, params, joined=in_transaction)
        else:
            proof = dumps([dict(evidence)])
            changed = self._statements.run(
                conn, with_evidence, (*params, proof), joined=in_transaction
            )
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

    # -- connections, migrations, errors ----------------------------------------------

    def _checkout(self) -> Connection:
        check_off_loop("the ledger (PostgreSQL)")
        try:
            return self._outage.getconn(self._pool, self._timeout)
        except psycopg.Error as exc:
            raise _map_error(exc, self._where) from exc

    def _put_back(self, conn: Connection) -> None:
        # A connection the server dropped comes back broken; the pool discards it.
        self._returned.note(conn)
        self._pool.putconn(conn)

    def _check(self, conn: Connection) -> None:
        """The pool's check of a connection being taken out; raises if it is unusable."""
        self._returned.check(conn, FRESH)

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            found = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
                (VERSION_TABLE, LEDGER_TABLE),
            ).fetchone()
            has_versions, has_ledger = (False, False) if found is None else found
            current = 0
            if has_versions:
                try:
                    with conn.transaction():
                        row = conn.execute(
                            "SELECT coalesce(max(version), 0) FROM toolbound_schema_version"
                        ).fetchone()
                except psycopg.errors.UndefinedColumn as exc:
                    msg = f"{self._where}: {VERSION_TABLE} is not toolbound's version table"
                    raise LedgerError(msg, code="corrupt_store") from exc
                current = int(row[0]) if row is not None else 0
            elif has_ledger:
                msg = (
                    f"{self._where} has a {LEDGER_TABLE} table but no {VERSION_TABLE}: not "
                    "a toolbound ledger, or a damaged one; refusing to touch it"
                )
                raise LedgerError(msg, code="corrupt_store")
            else:
                conn.execute(_VERSION_DDL)
            for migration in pending(current, where=self._where):
                for statement in migration.statements("postgres"):
                    conn.execute(statement.encode())  # bytes: DDL is not a query template
                conn.execute(
                    "INSERT INTO toolbound_schema_version VALUES (%s, %s, %s)",
                    (migration.version, migration.description, datetime.now(UTC)),
                )
            columns = {
                r[0]
                for r in conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
                    " AND attnum > 0 AND NOT attisdropped",
                    (LEDGER_TABLE,),
                )
            }
            if not columns >= _EXPECTED_COLUMNS:
                missing = ", ".join(sorted(_EXPECTED_COLUMNS - columns))
                msg = f"{self._where}: {LEDGER_TABLE} lacks columns {missing}; damaged ledger"
                raise LedgerError(msg, code="corrupt_store")


class PostgresTransaction:
    """What :meth:`PostgresLedger.atomic` yields: its connection, claim and advance."""

    __slots__ = ("_conn", "_ledger")

    def __init__(self, ledger: PostgresLedger, conn: Connection) -> None:
        self._ledger = ledger
        self._conn = conn

    @property
    def connection(self) -> Connection:
        """The connection of this transaction: write business rows through it.

        Do not commit on it; leaving the ``with`` block commits.
        """
        return self._conn

    def claim(self, intent: Intent, *, now: datetime) -> Claim:
        """:meth:`PostgresLedger.claim` inside this transaction."""
        try:
            return self._ledger._claim(self._conn, intent, now=now, in_transaction=True)  # noqa: SLF001
        except psycopg.Error as exc:
            raise _map_error(exc, self._ledger._where) from exc  # noqa: SLF001

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
        """:meth:`PostgresLedger.advance` inside this transaction."""
        try:
            self._ledger._advance(  # noqa: SLF001 - the transaction is part of the store
                self._conn,
                key,
                invocation_id=invocation_id,
                phase=phase,
                now=now,
                result=result,
                evidence=evidence,
                in_transaction=True,
                epoch=epoch,
            )
        except psycopg.Error as exc:
            raise _map_error(exc, self._ledger._where) from exc  # noqa: SLF001


class _Borrowed:
    """A connection for one ledger call, and whether it joins this thread's ``atomic()``.

    psycopg errors leave as ``LedgerError`` (R19). A class rather than a generator-based
    context manager: it runs twice per write.
    """

    __slots__ = ("_conn", "_joined", "_ledger")

    def __init__(self, ledger: PostgresLedger) -> None:
        self._ledger = ledger
        self._joined: Connection | None = getattr(ledger._local, "conn", None)  # noqa: SLF001
        self._conn: Connection | None = None

    def __enter__(self) -> tuple[Connection, bool]:
        joined = self._joined
        conn = self._conn = joined if joined is not None else self._ledger._checkout()  # noqa: SLF001
        return conn, joined is not None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._joined is None and self._conn is not None:
            self._ledger._put_back(self._conn)  # noqa: SLF001
        if isinstance(exc, psycopg.Error):
            raise _map_error(exc, self._ledger._where) from exc  # noqa: SLF001


# -- rows and errors -----------------------------------------------------------------


def _pk(key: LedgerKey) -> tuple[str, str, str]:
    return (key.scope, key.tool_version, key.key)


def _columns(record: LedgerRecord) -> tuple[Param, ...]:
    """``record`` as this store's columns, in ``_COLUMNS`` order (inverse of :func:`_record`)."""
    return (
        record.key.scope,
        record.key.tool_version,
        record.key.key,
        record.digest,
        record.invocation_id,
        record.tool,
        record.canonical,
        dumps(dict(record.subject)),
        record.phase,
        require_aware(record.deadline),
        require_aware(record.created_at),
        require_aware(record.updated_at),
        None if record.result is None else dumps_result(record.result),
        dumps([dict(e) for e in record.evidence]),
        record.epoch,
    )


class _SessionJson(Loader):
    """``json`` and ``jsonb`` text in the session's client encoding.

    psycopg's loader hands the bytes to :func:`json.loads`, which reads them as UTF-8
    (or UTF-16/32): in a LATIN1 session, say, any text outside ASCII fails to load.
    """

    def load(self, data: Buffer) -> object:
        """The JSON value of ``data``, decoded as the session encodes its text."""
        raw = data if isinstance(data, bytes) else bytes(data)
        conn = self.connection
        encoding = "utf-8" if conn is None else conn.info.encoding
        if encoding in ("utf-8", "ascii"):  # ascii: SQL_ASCII, whose bytes are as sent
            return json.loads(raw)
        return json.loads(raw.decode(encoding))


def _configure(conn: Connection) -> None:
    """Each new session of the pool: JSON read in the session's encoding."""
    conn.adapters.register_loader("json", _SessionJson)
    conn.adapters.register_loader("jsonb", _SessionJson)


def _one(row: TupleRow | None, key: LedgerKey) -> TupleRow:
    if row is None:  # only if someone deleted the row under us: never by the ledger
        msg = f"ledger record {key} vanished during a claim"
        raise LedgerError(msg, code="corrupt_store")
    return row


def _record(row: Sequence[object]) -> LedgerRecord:
    scope, version, key, digest, holder, tool, canonical, subject, phase, *rest = row
    deadline, created_at, updated_at, result, evidence, epoch = rest
    assert isinstance(deadline, datetime)  # noqa: S101 - timestamptz columns
    assert isinstance(created_at, datetime)  # noqa: S101
    assert isinstance(updated_at, datetime)  # noqa: S101
    assert isinstance(evidence, list)  # noqa: S101 - jsonb array, NOT NULL
    return LedgerRecord(
        key=LedgerKey(str(scope), str(version), str(key)),
        digest=str(digest),
        invocation_id=str(holder),
        tool=str(tool),
        canonical=bytes(canonical),  # type: ignore[call-overload]  # bytea
        subject=subject,  # type: ignore[arg-type]  # json object of strings
        phase=phase,  # type: ignore[arg-type]  # CHECK constraint keeps it a Phase
        deadline=deadline.astimezone(UTC),
        created_at=created_at.astimezone(UTC),
        updated_at=updated_at.astimezone(UTC),
        result=None if result is None else result_from_json(result),  # type: ignore[arg-type]
        evidence=tuple(evidence),
        epoch=int(epoch),  # type: ignore[call-overload]  # bigint NOT NULL
    )


def _map_error(exc: psycopg.Error, where: str) -> LedgerError:
    """R19: storage errors leave the store as LedgerError with a machine-readable code."""
    if isinstance(exc, pg_errors.DiskFull):
        code, what = "storage_full", "the server's disk is full; nothing was written"
    elif isinstance(exc, pg_errors.DataCorrupted | pg_errors.IndexCorrupted):
        code, what = "corrupt_store", "the server reports damaged data"
    elif isinstance(exc, pg_errors.UndefinedTable | pg_errors.UndefinedColumn):
        code, what = "corrupt_store", f"the {LEDGER_TABLE} table is missing or altered"
    elif isinstance(exc, psycopg.OperationalError):
        code, what = "storage_unavailable", "the connection to PostgreSQL failed or was lost"
    else:
        code, what = "storage_unavailable", "PostgreSQL refused the statement"
    error = LedgerError(f"ledger in {where}: {what} ({type(exc).__name__}: {exc})", code=code)
    error.recoverable = code in ("storage_unavailable", "storage_full")
    return error
