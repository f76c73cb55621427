"""A write's ledger statement held up in PostgreSQL stalls that write, and nothing else.

Both MCP surfaces: the gateway (over streamable HTTP) and the guarded server of local
tools that ``mcp-serve`` runs (in process).

The gateway runs on one event loop for every client. Here its ledger is a real
PostgreSQL cluster of the test's own, and another connection holds ``LOCK TABLE`` on
the ledger's table, so the claim of a write waits in the server. Meanwhile another
client's ``tools/list`` and read calls are answered at once — the claim waits on
the runtime's I/O pool, not on the loop — and once the lock is released the write
completes, exactly once. Loopback only, bounded (no wait here is longer than 20 s).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from local_tools import registry
from mcp import Client
from mcp_support import (
    LEO,
    MIRA,
    PRINCIPALS,
    TOKENS,
    as_,
    fault_upstream,
    gateway,
    grant,
    serving,
)

from pgcluster import find_bindir, throwaway_cluster
from toolbound import Grant, GrantPolicy, Runtime
from toolbound.ledger.migrations import LEDGER_TABLE
from toolbound.ledger.postgres import PostgresLedger
from toolbound.mcp import GuardedServer, StaticCatalog, holds_capabilities, load_gateway_config

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from pgcluster import PgCluster

SERVED_GRANTS = [
    Grant(subject="mira", tenant="acme", capability="notes:write", actions=frozenset({"create"})),
    Grant(subject="leo", tenant="acme", capability="notes:read", actions=frozenset({"read"})),
]
Timings = list[tuple[str, float]]

PROMPT = 1.0
"""Seconds within which a call that needs no ledger must be answered, however long the lock."""
LOCKED_FOR = 3.0
"""Seconds the ledger's table stays locked once the write is seen waiting on it."""
HELD_AT_MOST = 10.0
"""Seconds after which the lock is released in any case."""


def _config(tmp_path: Path, state: Path, store: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(
        f"""
[store]
url = "{store}"

[gateway]
stdio_principal = "mira"
{PRINCIPALS}
{grant("mira", "fault:read")}
{grant("mira", "fault:write", "modify")}
{grant("leo", "fault:read")}
{fault_upstream(state)}
"""
    )
    return path


def _waiting_on_a_lock(cluster: PgCluster) -> bool:
    """Whether a backend of the gateway waits for a lock on the ledger's table now."""
    with psycopg.connect(cluster.conninfo("toolbound"), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
            " WHERE c.relname = %s AND NOT l.granted",
            (LEDGER_TABLE,),
        ).fetchone()
    return row is not None and row[0] > 0


class _Lock:
    """``LOCK TABLE`` on the ledger's table, from a thread of its own.

    The lock is released when the test says so, or after ``HELD_AT_MOST`` seconds
    whatever happens: a gateway whose loop waited on the lock could not tell it to.
    """

    def __init__(self, cluster: PgCluster) -> None:
        self.taken = threading.Event()
        self.since = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._hold, args=(cluster,), daemon=True)
        self._thread.start()

    def _hold(self, cluster: PgCluster) -> None:
        with psycopg.connect(cluster.conninfo("toolbound")) as conn:
            conn.execute(f"LOCK TABLE {LEDGER_TABLE} IN ACCESS EXCLUSIVE MODE")
            self.since = time.monotonic()
            self.taken.set()
            self._done.wait(HELD_AT_MOST)
            conn.rollback()  # the lock goes with its transaction

    def release(self) -> None:
        self._done.set()
        self._thread.join(HELD_AT_MOST)


async def _timed(what: str, call: Awaitable[object]) -> tuple[str, float]:
    started = time.monotonic()
    result = await call
    assert not getattr(result, "is_error", False), result
    return what, time.monotonic() - started


async def _answered_promptly(reader: Client, read: str, args: dict[str, Any]) -> Timings:
    """``tools/list`` and reads by the other client, several times, each timed."""
    timings = []
    for _ in range(5):
        timings.append(await _timed("tools/list", reader.list_tools()))
        timings.append(await _timed(read, reader.call_tool(read, args)))
        await asyncio.sleep(0.1)
    return timings


async def _while_locked(
    cluster: PgCluster,
    write: Callable[[], Awaitable[object]],
    reader: Client,
    read: str,
    args: dict[str, Any],
) -> tuple[Timings, bool, object, object]:
    """The write held up by the lock, the reader's calls meanwhile, the write again after."""
    await reader.list_tools()  # the session open, the tools listed
    await _timed(read, reader.call_tool(read, args))  # and a first call made
    lock = _Lock(cluster)
    await asyncio.to_thread(lock.taken.wait, 10)
    try:
        waiting = asyncio.ensure_future(write())
        deadline = time.monotonic() + 10
        while not await asyncio.to_thread(_waiting_on_a_lock, cluster):
            assert time.monotonic() < deadline, "the write never reached the lock"
            assert not waiting.done(), waiting
            await asyncio.sleep(0.05)
        timings = await _answered_promptly(reader, read, args)
        await asyncio.sleep(max(0.0, LOCKED_FOR - (time.monotonic() - lock.since)))
        held_up = not waiting.done()
    finally:
        lock.release()
    written = await asyncio.wait_for(waiting, 20)
    again = await asyncio.wait_for(write(), 20)
    return timings, held_up, written, again


def _check(timings: Timings, held_up: bool, written: object, again: object) -> None:  # noqa: FBT001
    slow = [(what, round(s, 3)) for what, s in timings if s >= PROMPT]
    assert not slow, f"answered only after the ledger's lock: {slow} of {timings}"
    assert held_up, "the write did not wait for the ledger's lock"
    assert not getattr(written, "is_error", True), written
    assert not getattr(again, "is_error", True), again


def _cluster() -> contextlib.AbstractContextManager[PgCluster]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("NO POSTGRESQL BINARIES FOUND: the ledger outage test did NOT run")
    return throwaway_cluster(bindir, databases=("toolbound",))


def test_a_write_waiting_on_a_locked_ledger_stalls_no_other_client(
    tmp_path: Path, state: Path
) -> None:
    """The gateway: mira's ``fault.append`` waits on the lock, leo's calls do not."""
    with _cluster() as cluster:
        store = f"postgresql://postgres@127.0.0.1:{cluster.port}/toolbound"
        config = load_gateway_config(_config(tmp_path, state, store))

        async def scenario() -> tuple[Timings, bool, object, object]:
            async with (
                serving(gateway(config)) as url,
                as_(TOKENS["mira"], url) as writer,
                as_(TOKENS["leo"], url) as reader,
            ):
                return await _while_locked(
                    cluster,
                    lambda: writer.call_tool("fault.append", {"line": "once"}),
                    reader,
                    "fault.echo",
                    {"text": "still here"},
                )

        timings, held_up, written, again = asyncio.run(scenario())

    _check(timings, held_up, written, again)
    assert "appended line 1" in written.content[0].text  # type: ignore[attr-defined]
    # The same call again replays the committed result: the upstream appended once.
    assert (state / "log.txt").read_text() == "once\n"


def test_a_served_write_waiting_on_a_locked_ledger_stalls_no_other_client(
    tmp_path: Path,
) -> None:
    """What ``mcp-serve`` runs (a guarded server of local tools): the same, on its runtime."""
    notes = tmp_path / "notes.txt"
    with _cluster() as cluster:
        ledger = PostgresLedger(cluster.conninfo("toolbound"))
        runtime = Runtime(policy=GrantPolicy(SERVED_GRANTS), ledger=ledger)
        server = GuardedServer(
            runtime=runtime,
            catalog=StaticCatalog(registry(notes), holds_capabilities(SERVED_GRANTS)),
        )

        async def scenario() -> tuple[Timings, bool, object, object]:
            async with (
                Client(server.lowlevel(MIRA)) as writer,
                Client(server.lowlevel(LEO)) as reader,
            ):
                return await _while_locked(
                    cluster,
                    lambda: writer.call_tool("notes.add", {"title": "once"}),
                    reader,
                    "notes.read",
                    {},
                )

        try:
            timings, held_up, written, again = asyncio.run(scenario())
        finally:
            runtime.close()
            ledger.close()

    _check(timings, held_up, written, again)
    assert notes.read_text() == "once\n"  # the second call replayed: one note
