"""The PostgreSQL stores' check of a pooled connection: a round trip only when it may be stale.

A pool that checks each connection it hands out (``psycopg_pool``'s
``check_connection``, an empty query) spends a round trip on every call. A
connection back from a call moments ago, with nothing waiting on its socket, is as
sound as that call found it: a server that drops a session (a restart,
``pg_terminate_backend``, an idle timeout) sends an error and closes the socket, so
the socket turns readable. :class:`Returns` remembers when each connection came back
and checks with the round trip only a connection idle longer than ``fresh`` seconds,
or one whose socket has something to read. The ledger and the journal share it.
"""

from __future__ import annotations

import select
import weakref
from time import monotonic
from typing import TYPE_CHECKING, Final

from psycopg import pq
from psycopg_pool import ConnectionPool

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["FRESH", "Returns", "quiet", "readable"]

FRESH: Final = 1.0
"""Seconds after a call during which its connection is handed out again without a round
trip, if nothing has arrived on its socket since."""


class Returns:
    """When each pooled connection was last given back, and the check that reads it."""

    def __init__(self) -> None:
        self._at: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()

    def note(self, conn: Connection) -> None:
        """``conn`` is going back to the pool now."""
        self._at[conn] = monotonic()

    def check(self, conn: Connection, fresh: float) -> None:
        """Raise if ``conn`` is unusable; a round trip unless it is back within ``fresh``."""
        returned = self._at.get(conn)
        if returned is not None and monotonic() - returned < fresh and quiet(conn):
            return
        ConnectionPool.check_connection(conn)


def quiet(conn: Connection) -> bool:
    """Idle, sound as far as libpq knows, and nothing from the server waiting to be read."""
    pgconn = conn.pgconn
    if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    return not readable(pgconn.socket)


def readable(fd: int) -> bool:
    """Whether ``fd`` has something to read (or was closed), without waiting."""
    if not hasattr(select, "poll"):  # Windows: select() has no limit on socket numbers
        return bool(select.select([fd], [], [], 0)[0])
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))
