"""The journal in PostgreSQL (psycopg 3, extra ``postgres``)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, cast

from toolbound._loopguard import check_off_loop
from toolbound.journal._sql import SQLJournal
from toolbound.journal.schema import create

if TYPE_CHECKING:
    from collections.abc import Iterator

    from toolbound.journal.schema import Cursor

__all__ = ["PostgresJournal"]


class PostgresJournal(SQLJournal):
    """The journal in PostgreSQL, through a psycopg 3 connection pool."""

    _mark = "%s"
    _now = "EXTRACT(EPOCH FROM clock_timestamp())::double precision"

    def __init__(self, conninfo: str, *, max_size: int = 8) -> None:
        try:
            from psycopg_pool import ConnectionPool  # noqa: PLC0415
        except ImportError as exc:  # pragma: no cover - the extra is missing
            msg = "PostgresJournal needs psycopg: pip install 'toolbound[postgres]'"
            raise ImportError(msg) from exc
        self._pool = ConnectionPool(conninfo, min_size=1, max_size=max_size, open=True)
        try:
            with self._tx() as cur:
                # Two processes starting at once must not race on CREATE TABLE.
                cur.execute("SELECT pg_advisory_xact_lock(7210431)")
                create(cur, _column_names, self._mark)
        except BaseException:
            self._pool.close()  # a journal refused (a newer format) holds nothing
            raise

    @contextmanager
    def _tx(self, *, write: bool = True) -> Iterator[Cursor]:  # noqa: ARG002 - MVCC
        check_off_loop("the journal (PostgreSQL)")
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cast("Cursor", cur)

    def close(self) -> None:
        """Close the pool."""
        self._pool.close()


def _column_names(cur: Cursor) -> set[str]:
    cur.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = 'toolbound_service_calls'"
    )
    return {str(row[0]) for row in cur.fetchall()}
