"""The PostgreSQL stores' check of a pooled connection: a round trip only when it may be stale.

A pool that checks each connection it hands out (``psycopg_pool``'s
``check_connection``, an empty query) spends a round trip on every call. A
connection back from a call moments ago, with nothing waiting on its socket, is as
sound as that call found it: a server that drops a session (a restart,
``pg_terminate_backend``, an idle timeout) sends an error and closes the socket, so
the socket turns readable. :class:`Returns` remembers when each connection came back
and checks with the round trip only a connection idle longer than ``fresh`` seconds,
or one whose socket has something to read. The ledger and the journal share it.

They share :class:`Outage` too: how a request learns at once that the server is down.
``psycopg_pool`` retries a failed connection with a backoff (1 s, 2 s, 4 s, …, for
five minutes) and lets a caller wait out its whole timeout for a connection nobody
can make; after an outage it reconnects only when its backoff next fires, seconds
after the server is back. With :class:`Outage` the pool gives up on a failed attempt
at once (``reconnect_timeout=0``), and the stores take connections through
:meth:`Outage.getconn`, which answers ``PoolTimeout`` at once while the pool holds no
connection and its last attempt failed under :data:`RETRY` seconds ago, and otherwise
waits in slices of :data:`SLICE` seconds, giving up as soon as the pool has no
connection and an attempt failed. The first request after :data:`RETRY` tries again,
so a server back is found within about :data:`RETRY` seconds, and no caller waits on a
server that refused it.
"""

from __future__ import annotations

import select
import weakref
from time import monotonic
from typing import TYPE_CHECKING, Final

from psycopg import pq
from psycopg_pool import ConnectionPool, PoolTimeout

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ["FRESH", "RETRY", "SLICE", "Outage", "Returns", "quiet", "readable"]

FRESH: Final = 1.0
"""Seconds after a call during which its connection is handed out again without a round
trip, if nothing has arrived on its socket since."""


RETRY: Final = 0.25
"""Seconds after a failed connection attempt during which a request finding the pool
empty is refused at once, without another attempt."""

SLICE: Final = 0.1
"""The longest a request waits for a connection before it looks at the server again."""


class Outage:
    """When the pool last failed to connect, and the borrowing that reads it."""

    def __init__(self) -> None:
        self._failed_at: float | None = None

    def connect_failed(self, _pool: object) -> None:
        """The pool's ``reconnect_failed``: an attempt to connect has just failed."""
        self._failed_at = monotonic()

    def getconn(self, pool: ConnectionPool[Connection], timeout: float) -> Connection:
        """A connection from ``pool`` within ``timeout`` seconds, or ``PoolTimeout``.

        ``PoolTimeout`` at once while the pool holds no connection (none idle, none
        lent, none being made) and its last attempt failed under :data:`RETRY`
        seconds ago; while waiting, as soon as it holds none and an attempt failed.
        """
        deadline = monotonic() + timeout
        while True:
            failed_at = self._failed_at
            if failed_at is not None and _empty(pool):
                ago = monotonic() - failed_at
                if ago < RETRY:
                    msg = f"the server refused a connection {ago * 1000:.0f} ms ago"
                    raise PoolTimeout(msg)
            try:
                conn = pool.getconn(min(SLICE, deadline - monotonic()))
            except PoolTimeout:
                if self._failed_at is not None and _empty(pool):
                    msg = "the server refused a connection: none is left in the pool"
                    raise PoolTimeout(msg) from None
                if monotonic() >= deadline:
                    msg = f"no connection free within {timeout:g} s"
                    raise PoolTimeout(msg) from None
                continue
            self._failed_at = None
            return conn


def _empty(pool: ConnectionPool[Connection]) -> bool:
    """Whether ``pool`` holds no connection at all: none idle, lent or being made."""
    return pool.get_stats()["pool_size"] == 0


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
