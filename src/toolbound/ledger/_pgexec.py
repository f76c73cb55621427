"""How the PostgreSQL ledger runs its per-write statements: prepared once per session.

A write asks two statements of the server (the claim's ``INSERT`` and the advance's
``UPDATE``), and in a busy process the work psycopg does around each one — a cursor, a
query template, an adapter per parameter, a result object — costs more CPU than the
round trip itself. Several callers sharing one runtime share one interpreter lock, so
that CPU is what limits them.

A :class:`Statement` is run here on a connection the ledger holds alone (a pooled
connection in autocommit, idle): it is prepared on that session once, under a name of
its own, and each call is one ``PQexecPrepared`` with the parameters already as bytes.
libpq waits for the server with the interpreter lock released, as psycopg does. The
statement commits on its own (autocommit): durable before the call returns (R9).

Inside a transaction the connection is shared with the tool's own statements, which
may deallocate prepared statements (psycopg deallocates them all after a ``DROP``, an
``ALTER`` or a ``ROLLBACK`` it has run), so there the statement goes through psycopg,
not prepared by us (:class:`psycopg.RawCursor`, the same ``$n`` text). On a connection
of our own, a statement the server no longer knows (``26000``) failed before doing
anything, so it is prepared again and run once more.

Errors are psycopg's own classes, built from the server's result as psycopg builds
them, so the ledger maps them at its boundary like any other psycopg error.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final, cast

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq

if TYPE_CHECKING:
    from collections.abc import Sequence

    from psycopg.rows import TupleRow

    Connection = psycopg.Connection[TupleRow]

__all__ = ["Param", "Statement", "Statements"]

Param = str | bytes | datetime | int | None
"""A parameter value: text (``text``, ``json`` and ``jsonb`` columns), ``bytea``, an
aware instant (``timestamptz``), an integer (``bigint``), or NULL."""

_COMMAND_OK: Final = pq.ExecStatus.COMMAND_OK
_UNKNOWN_STATEMENT: Final = b"26000"  # invalid_sql_statement_name
_ALREADY_PREPARED: Final = b"42P05"  # duplicate_prepared_statement
_BAD: Final = pq.ConnStatus.BAD
_SQLSTATE: Final = pq.DiagnosticField.SQLSTATE


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement with ``$n`` parameters, and the name it is prepared under."""

    name: bytes
    sql: str

    @classmethod
    def named(cls, label: str, sql: str) -> Statement:
        """``sql`` under ``toolbound_<label>_<digest of sql>``.

        The name carries the text: a session that already holds a statement of that
        name (prepared by an earlier call this process lost track of) holds this very
        statement, never an older text under the same label.
        """
        text = hashlib.blake2s(sql.encode(), digest_size=4).hexdigest()
        return cls(f"toolbound_{label}_{text}".encode(), sql)

    @property
    def text(self) -> bytes:
        """The statement as libpq takes it."""
        return self.sql.encode()


class Statements:
    """Runs :class:`Statement` objects; remembers which each session has prepared."""

    __slots__ = ("_joined", "_prepared")

    def __init__(self) -> None:
        self._prepared: weakref.WeakKeyDictionary[Connection, set[bytes]] = (
            weakref.WeakKeyDictionary()
        )
        self._joined = threading.local()

    def run(
        self, conn: Connection, statement: Statement, params: Sequence[Param], *, joined: bool
    ) -> int:
        """Run ``statement``; the number of rows it changed. Raises ``psycopg.Error``.

        ``joined``: ``conn`` is inside a transaction others write through too.
        """
        if joined:
            return self._cursor(conn).execute(statement.sql, params).rowcount
        pgconn = conn.pgconn
        encoding = conn.info.encoding
        # As psycopg's str dumper: a SQL_ASCII session takes text as UTF-8.
        text = "utf-8" if encoding == "ascii" else encoding
        # Text in the session's encoding; an instant in psycopg's own text form of an
        # aware datetime (its timestamptz dumper), an integer in decimal; bytea as is,
        # in binary; None is NULL
        # (libpq takes it, though psycopg's stub for exec_prepared omits it).
        values = cast(
            "list[bytes]",
            [
                v.encode(text)
                if isinstance(v, str)
                else v
                if v is None or isinstance(v, bytes)
                else str(v).encode()
                for v in params
            ],
        )
        formats = [1 if isinstance(v, bytes) else 0 for v in params]
        prepared = self._prepared.get(conn)
        if prepared is None:
            prepared = self._prepared[conn] = set()
        if statement.name not in prepared:
            _prepare(pgconn, statement, encoding)
            prepared.add(statement.name)
        result = pgconn.exec_prepared(statement.name, values, formats)
        if (
            result.status != _COMMAND_OK
            and result.error_field(_SQLSTATE) == _UNKNOWN_STATEMENT
            and pgconn.transaction_status == pq.TransactionStatus.IDLE
        ):
            # Deallocated under us (a DEALLOCATE or DISCARD on this session): the
            # statement did nothing, so prepare it again and run it once more.
            _prepare(pgconn, statement, encoding)
            result = pgconn.exec_prepared(statement.name, values, formats)
        _raise_for(pgconn, result, encoding)
        return result.command_tuples or 0

    def _cursor(self, conn: Connection) -> psycopg.RawCursor[TupleRow]:
        """A cursor on ``conn`` for this thread: one per transaction, not per statement.

        Only the thread holding ``conn`` runs statements on it, so a cursor kept per
        thread for the connection it last used is never shared.
        """
        cursor: psycopg.RawCursor[TupleRow] | None = getattr(self._joined, "cursor", None)
        if cursor is None or cursor.connection is not conn:
            cursor = self._joined.cursor = psycopg.RawCursor(conn)
        return cursor


def _prepare(pgconn: pq.abc.PGconn, statement: Statement, encoding: str) -> None:
    result = pgconn.prepare(statement.name, statement.text)
    if result.status == _COMMAND_OK or result.error_field(_SQLSTATE) == _ALREADY_PREPARED:
        return
    _raise_for(pgconn, result, encoding)


def _raise_for(pgconn: pq.abc.PGconn, result: pq.abc.PGresult, encoding: str) -> None:
    """Raise the ``psycopg.Error`` psycopg would for ``result``, if it is one."""
    if result.status == _COMMAND_OK:
        return
    if pgconn.status == _BAD and result.error_field(_SQLSTATE) is None:
        # The connection went away without the server saying why (a reset socket).
        raise psycopg.OperationalError(result.get_error_message(encoding))
    raise pg_errors.error_from_result(result, encoding=encoding)
