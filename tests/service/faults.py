"""Faulty dependencies on loopback for the service's fault tests.

:class:`SilentServer` accepts TCP connections and never answers (an identity provider
that hangs); :class:`FailingJournal` is the service's real journal with one write made
to fail the way a full disk or a failed ``write(2)`` does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from toolbound.journal import Journal, StoredCall


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/jwks.json"
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._stop = threading.Event()

    @contextlib.contextmanager
    def running(self) -> Iterator[SilentServer]:
        """Accept (and hold) connections until the block ends."""
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._sock.close()
            thread.join(5)
            for held in self._held:
                held.close()

    def _accept(self) -> None:
        self._sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            self._held.append(conn)


class FailingJournal:
    """The service's journal, whose first write of a call's end raises ``error``.

    Everything else goes to the real journal: the call's head is written as it opens,
    and any write after the failed one lands.
    """

    def __init__(self, journal: Journal, error: BaseException) -> None:
        self._journal = journal
        self._error: BaseException | None = error

    def put_call(self, call: StoredCall, **kwargs: object) -> object:
        if call.status != "running" and self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._journal.put_call(call, **kwargs)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self._journal, name)
