"""Counting what a request asks of its stores: statements and transactions.

SQLite: every connection the journal and the ledger open carries a trace callback
(``sqlite3.Connection.set_trace_callback``), which sees each statement as SQLite
starts it, ``BEGIN`` and ``COMMIT`` included. PostgreSQL: the service's sessions run
with ``log_statement=all`` (set per session through the URL's ``options``; the test
connects as a superuser), and the server's log says what each backend ran.

A transaction is one ``BEGIN`` … ``COMMIT``/``ROLLBACK``, or one statement run
outside them (it commits on its own). The requests are sent one at a time, so what
the stores ran between two requests is the second one's work; a request kind is
measured several times and the fewest counted (a connection's first use, a
checkpoint thread's ``PRAGMA`` or a pool opening a session only ever add).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from service_config import KEYS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path

    import pytest
    from starlette.testclient import TestClient

__all__ = [
    "KINDS",
    "Count",
    "PostgresLog",
    "SQLiteTrace",
    "count_transactions",
    "measure",
]

KINDS = (
    "read",
    "write",
    "write, parked",
    "decision (approve)",
    "GET invocation",
    "confirmations list",
    "console pending page",
)
"""The kinds of request measured, in the order the tables show them."""


@dataclass(frozen=True, slots=True, order=True)
class Count:
    """What one request ran: statements (``BEGIN``/``COMMIT`` included) and transactions."""

    statements: int
    transactions: int


_ENDS = ("COMMIT", "ROLLBACK", "END")


def count_transactions(statements: Iterable[tuple[object, str]]) -> Count:
    """Statements and transactions in ``(session, sql)`` pairs, in the order they ran."""
    open_in: set[object] = set()
    n = tx = 0
    for session, sql in statements:
        n += 1
        word = sql.split(None, 1)[0].upper() if sql.strip() else ""
        if not word:
            continue  # an empty statement: a round trip, no transaction
        if word == "BEGIN":
            open_in.add(session)
        elif word in _ENDS and not sql.upper().lstrip().startswith("ROLLBACK TO"):
            if session in open_in:
                open_in.discard(session)
                tx += 1
        elif session not in open_in:
            tx += 1
    return Count(n, tx)


class SQLiteTrace:
    """Every SQLite connection opened while installed records what it runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._seen: list[tuple[object, str]] = []
        self._lock = threading.Lock()
        connect = sqlite3.connect

        def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
            conn = connect(*args, **kwargs)  # type: ignore[call-overload]
            session = object()

            def note(sql: str) -> None:
                with self._lock:
                    self._seen.append((session, sql))

            conn.set_trace_callback(note)
            return conn  # type: ignore[no-any-return]

        monkeypatch.setattr(sqlite3, "connect", traced)

    def mark(self) -> int:
        with self._lock:
            return len(self._seen)

    def since(self, mark: int) -> list[tuple[object, str]]:
        with self._lock:
            return list(self._seen[mark:])


_ENTRY = re.compile(r"^\d{4}-\d\d-\d\d \S+ \S+ \[")
_STATEMENT = re.compile(r"^\S+ \S+ \S+ \[(\d+)\] LOG:  (?:statement|execute [^:]*): (.*)$")


class PostgresLog:
    """What the service's sessions ran, read from the server's log.

    An empty statement is the pools' check of a connection as it is taken out: a
    round trip, counted as a statement of no transaction.
    """

    def __init__(self, log: Path) -> None:
        self._log = log

    def mark(self) -> int:
        return self._log.stat().st_size

    def since(self, mark: int) -> list[tuple[object, str]]:
        with self._log.open("rb") as f:
            f.seek(mark)
            text = f.read().decode(errors="replace")
        found: list[tuple[str, list[str]]] = []
        statement: list[str] | None = None
        for line in text.splitlines():
            if not _ENTRY.match(line):
                if statement is not None:  # a statement written over several lines
                    statement.append(line)
                continue
            m = _STATEMENT.match(line)
            statement = None
            if m:
                statement = [m.group(2)]
                found.append((m.group(1), statement))
        return [(session, "\n".join(lines)) for session, lines in found]


def _auth(who: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[who]}"}


def _propose(client: TestClient, tool: str, text: str) -> dict[str, object]:
    """Propose ``tool`` with a text of its own: each write is a new effect, never a replay."""
    key = uuid.uuid4().hex
    body = {"tool": tool, "arguments": f'{{"text": "{text} {key}"}}', "call_id": f"call-{key}"}
    r = client.post("/v1/proposals", json=body, headers={**_auth("agent"), "Idempotency-Key": key})
    assert r.status_code in {200, 202}, r.text
    answer: dict[str, object] = r.json()
    return answer


def _login(console: TestClient, who: str) -> None:
    page = console.get("/console/login").text
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    r = console.post("/console/login", data={"key": KEYS[who], "csrf": found.group(1)})
    assert r.status_code == 303, r.text


def _requests(client: TestClient, console: TestClient) -> Iterator[tuple[str, Callable[[], None]]]:
    """One request of each kind, as (kind, send); each send checks its answer."""
    read = _propose(client, "notes.shout", "warm")
    parked = _propose(client, "notes.send", "warm")

    def read_call() -> None:
        assert _propose(client, "notes.shout", "hi")["status"] == "observed"

    def write() -> None:
        assert _propose(client, "notes.add", "milk")["status"] == "observed"

    def write_parked() -> None:
        nonlocal parked
        parked = _propose(client, "notes.send", "to ana")
        assert parked["status"] == "awaiting_confirmation"

    def approve() -> None:
        r = client.post(
            f"/v1/invocations/{parked['invocation_id']}/decision",
            json={"digest": parked["digest"], "decision": "approve"},
            headers=_auth("ana"),
        )
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "observed"

    def get_invocation() -> None:
        r = client.get(f"/v1/invocations/{read['invocation_id']}", headers=_auth("ops"))
        assert r.status_code == 200, r.text

    def confirmations() -> None:
        r = client.get("/v1/confirmations", headers=_auth("ana"))
        assert r.status_code == 200, r.text

    def pending_page() -> None:
        r = console.get("/console/pending")
        assert r.status_code == 200, r.text

    sends = (read_call, write, write_parked, approve, get_invocation, confirmations, pending_page)
    yield from zip(KINDS, sends, strict=True)


def measure(
    client: TestClient,
    console: TestClient,
    source: SQLiteTrace | PostgresLog,
    *,
    rounds: int = 3,
) -> dict[str, Count]:
    """The fewest statements and transactions each kind of request ran, over ``rounds``."""
    _login(console, "ana")
    best: dict[str, Count] = {}
    for _ in range(rounds):
        for kind, send in _requests(client, console):
            mark = source.mark()
            send()
            count = count_transactions(source.since(mark))
            best[kind] = min(best.get(kind, count), count)
    return best
