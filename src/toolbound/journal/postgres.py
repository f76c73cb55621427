"""The journal in PostgreSQL (psycopg 3, extra ``postgres``).

A server that cannot be reached, a pool with no connection free within ``timeout``,
a statement cancelled by ``statement_timeout`` or a full disk raise
:class:`~toolbound.journal.JournalError` with the code ``storage_unavailable`` (or
``storage_full``), never psycopg's own errors: the service answers them 503.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from toolbound._loopguard import check_off_loop
from toolbound.journal._records import JournalError
from toolbound.journal._sql import SQLJournal
from toolbound.journal.schema import create

if TYPE_CHECKING:
    from collections.abc import Iterator

    from psycopg import Connection

    from toolbound.journal.schema import Cursor

__all__ = ["PostgresJournal"]


class PostgresJournal(SQLJournal):
    """The journal in PostgreSQL, through a psycopg 3 connection pool.

    ``timeout`` bounds the wait for a pooled connection (and for the first one, at
    start). Each connection is checked as it is taken from the pool, like the
    ledger's, so one the server dropped while idle (a restart) is replaced rather than
    failing the first request after it.
    """

    _mark = "%s"
    _now = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"
    # Transactions commit out of order, so a sequence number could be read past before
    # a lower one commits. A notice's place is its transaction's id instead, and a
    # reader takes only those of transactions older than every one still running:
    # nothing can commit behind them.
    _pos = "pg_current_xact_id()::text::bigint"
    _settled = " AND pos < pg_snapshot_xmin(pg_current_snapshot())::text::bigint"

    def __init__(self, conninfo: str, *, max_size: int = 8, timeout: float = 10.0) -> None:
        try:
            from psycopg_pool import ConnectionPool  # noqa: PLC0415

            from toolbound._pgcheck import FRESH, Outage, Returns  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - the extra is missing
            msg = "PostgresJournal needs psycopg: pip install 'toolbound[postgres]'"
            raise ImportError(msg) from exc
        self._returns = returns = Returns()
        self._outage = outage = Outage()
        self._timeout = timeout
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            # A round trip only for a connection idle a while, or one the server spoke on
            # since (it dropped the session): as the ledger's pool (toolbound._pgcheck).
            # Its return is noted by _tx and _alone, not by a `reset` callback, with
            # which the pool would hand every connection back through its worker thread.
            check=lambda conn: returns.check(conn, FRESH),
            # BEGIN and COMMIT only around a transaction's several statements.
            kwargs={"autocommit": True},
            # No backoff: a request finds a server down at once, and back within
            # a quarter of a second (toolbound._pgcheck.Outage).
            reconnect_timeout=0,
            reconnect_failed=outage.connect_failed,
            name="toolbound-journal",
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            with self._tx() as cur:
                # Two processes starting at once must not race on CREATE TABLE.
                cur.execute("SELECT pg_advisory_xact_lock(7210431)")
                create(cur, _column_names, self._mark)
        except BaseException:
            self._pool.close()  # a journal refused (a newer format) holds nothing
            raise

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Cursor]:  # noqa: ARG002 - MVCC
        with self._connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cast("Cursor", cur)

    @contextmanager
    def _alone(self) -> Iterator[Cursor]:
        # The pool's sessions are in autocommit: one statement is its own transaction.
        with self._connection() as conn, conn.cursor() as cur:
            yield cast("Cursor", cur)

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A pooled connection, given back (and its return noted) when the block ends."""
        check_off_loop("the journal (PostgreSQL)")
        with _mapped():
            conn = self._outage.getconn(self._pool, self._timeout)
            try:
                with conn:  # psycopg's: rolls back on an error, keeps a pooled connection open
                    yield conn
            finally:
                self._returns.note(conn)
                self._pool.putconn(conn)

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()


@contextmanager
def _mapped() -> Iterator[None]:
    """The operational failures psycopg raises, as the journal's ``storage_*`` errors."""
    import psycopg  # noqa: PLC0415 - imported with the pool

    try:
        yield
    except psycopg.OperationalError as exc:
        # Down, unreachable, no connection free in time, cancelled by
        # statement_timeout, a full disk: a store that cannot answer now.
        full = isinstance(exc, psycopg.errors.DiskFull)
        code = "storage_full" if full else "storage_unavailable"
        msg = f"the journal's PostgreSQL database cannot answer now: {exc}"
        raise JournalError(msg, code=code) from exc


def _column_names(cur: Cursor) -> set[str]:
    cur.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = 'toolbound_service_calls'"
    )
    return {str(row[0]) for row in cur.fetchall()}
