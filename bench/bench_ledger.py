"""Ledger writes per second on SQLite and PostgreSQL, beside a same-run bare insert.

One *ledger write* is what the runtime asks of the ledger for a non-transactional write:
``claim_executing`` (the key claimed, already ``executing``) before the tool, then
``advance(committed, small result)`` after it — two commits, because R9 wants the
intent durable before the side effect and the outcome after it. *Claim apart* records
the claim and ``executing`` as two commits (three in all), as the runtime once did. A
*transactional write* is the R8 shared-transaction path: ``claim``, then one
``atomic()`` holding ``advance(executing)``, the business insert and
``advance(committed)`` — two commits, business row included. A *one-transaction
write* puts the claim in that transaction too: one commit. Nothing is lost by it (the
intent and the effect appear together or not at all); the price is that the key's
lock, and on SQLite the database's write lock, is held while the tool runs.

The baseline is a bare single-row insert-and-commit into the same database with the
same durability (same file and ``synchronous`` for SQLite; same server, ``fsync=on``,
``synchronous_commit=on`` for PostgreSQL). Ratios are ledger time / baseline time per
operation (1.0 = free). Every durable commit pays one WAL flush, so where fsync
dominates the floor is about 2x for a ledger write. Beside each rate is this process's
CPU per operation (Python, the driver, SQLite itself and the kernel's share): where
fsync is fast, that is what a write costs.

PostgreSQL runs in a throwaway cluster on loopback, started here (the tests' helper).
Run: ``python bench/bench_ledger.py`` (add ``--quick`` for a smoke run).
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pgcluster import find_bindir, throwaway_cluster
from toolbound._model import Result
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import Claimed, Intent, Ledger, LedgerKey

if TYPE_CHECKING:
    from collections.abc import Callable

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
QUICK = "--quick" in sys.argv
ROUNDS, WINDOW = (1, 0.2) if QUICK else (3, 0.5)
_keys = count()


def _intent(key: LedgerKey, invocation_id: str) -> Intent:
    return Intent(
        key=key,
        digest="d" * 64,
        invocation_id=invocation_id,
        tool="orders.create@v1",
        canonical=b'{"item":"tea","qty":1}',
        subject={"id": "mira", "tenant": "acme", "session": "s-1"},
        deadline=T0 + timedelta(seconds=30),
    )


def _result(invocation_id: str) -> Result:
    return Result(
        invocation_id=invocation_id,
        status="ok",
        value={"order": "o-42", "total": 12.5},
        commit_status="committed",
        observed_at=T0,
    )


def ledger_write(ledger: Ledger) -> None:
    """Claimed as executing, then committed: two durable steps, one commit each (R9)."""
    n = next(_keys)
    key, inv = LedgerKey("bench", "v1", f"k{n}"), f"inv-{n}"
    claim = ledger.claim_executing(_intent(key, inv), now=T0)
    assert isinstance(claim, Claimed)
    ledger.advance(key, invocation_id=inv, phase="committed", now=T0, result=_result(inv))


def claim_apart_write(ledger: Ledger) -> None:
    """Intent, executing and committed: three durable phases, one commit each."""
    n = next(_keys)
    key, inv = LedgerKey("bench", "v1", f"k{n}"), f"inv-{n}"
    claim = ledger.claim(_intent(key, inv), now=T0)
    assert isinstance(claim, Claimed)
    ledger.advance(key, invocation_id=inv, phase="executing", now=T0)
    ledger.advance(key, invocation_id=inv, phase="committed", now=T0, result=_result(inv))


def transactional_write(ledger: Ledger, insert_sql: str) -> None:
    """Intent durable first, then business row + executing + committed in one commit (R8)."""
    n = next(_keys)
    key, inv = LedgerKey("bench", "v1", f"k{n}"), f"inv-{n}"
    claim = ledger.claim(_intent(key, inv), now=T0)
    assert isinstance(claim, Claimed)
    with ledger.atomic() as tx:
        tx.advance(key, invocation_id=inv, phase="executing", now=T0)
        tx.connection.execute(insert_sql, (f"k{n}", "o-42"))  # type: ignore[attr-defined]
        tx.advance(key, invocation_id=inv, phase="committed", now=T0, result=_result(inv))


def one_transaction_write(ledger: Ledger, insert_sql: str) -> None:
    """Claim, executing, business row and committed in one commit (R8, same database)."""
    n = next(_keys)
    key, inv = LedgerKey("bench", "v1", f"k{n}"), f"inv-{n}"
    with ledger.atomic() as tx:
        claim = tx.claim(_intent(key, inv), now=T0)
        assert isinstance(claim, Claimed)
        tx.advance(key, invocation_id=inv, phase="executing", now=T0)
        tx.connection.execute(insert_sql, (f"k{n}", "o-42"))  # type: ignore[attr-defined]
        tx.advance(key, invocation_id=inv, phase="committed", now=T0, result=_result(inv))


def threaded_rate(op: Callable[[], None], threads: int, seconds: float) -> float:
    """Total operations per second of ``threads`` threads each running ``op``."""
    stop = time.perf_counter() + seconds
    counts = [0] * threads

    def worker(i: int) -> None:
        while time.perf_counter() < stop:
            op()
            counts[i] += 1

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return sum(counts) / (time.perf_counter() - start)


def compare(ops: dict[str, Callable[[], None]], threads: int = 1) -> dict[str, tuple[float, float]]:
    """Median ops/s and this process's CPU µs per op of each op, in interleaved rounds.

    fsync latency on a shared disk drifts over seconds; interleaving the baseline with
    the ledger in short rounds keeps the ratio honest.
    """
    for op in ops.values():  # warm up: statements prepared, files and pages allocated
        for _ in range(10):
            op()
    rates: dict[str, list[float]] = {name: [] for name in ops}
    cpu: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(ROUNDS):
        for name, op in ops.items():
            used, started = time.process_time(), time.perf_counter()
            rate = threaded_rate(op, threads, WINDOW)
            used, elapsed = time.process_time() - used, time.perf_counter() - started
            rates[name].append(rate)
            cpu[name].append(used / (rate * elapsed) * 1e6)
    return {name: (statistics.median(rates[name]), statistics.median(cpu[name])) for name in ops}


def report(title: str, figures: dict[str, tuple[float, float]]) -> None:
    """Print each rate, its time per operation relative to the baseline, and its CPU."""
    base = figures[BASELINE][0]
    print(title)
    for name, (ops, cpu) in figures.items():
        ratio = "" if name == BASELINE else f"x{base / ops:5.2f}"
        print(f"  {name:<48} {ops:>9,.0f} ops/s {ratio:<6}  CPU {cpu:>5,.0f} µs per op")


BASELINE = "bare insert-and-commit (baseline)"
LEDGER = "ledger write (claim executing + advance = 2 commits)"
APART = "claim apart (claim + 2 advances = 3 commits)"
TRANSACTIONAL = "transactional write (2 commits, row included)"
ONE_TRANSACTION = "one-transaction write (1 commit, row included)"
UNCHECKED = "ledger write, check_connections=False"


def bench_sqlite() -> None:
    """SQLite at synchronous FULL (the default) and NORMAL, one file, one process."""
    for synchronous in ("FULL", "NORMAL"):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "ledger.db"
            ledger = SQLiteLedger(path, synchronous=synchronous)  # type: ignore[arg-type]
            with ledger.atomic() as tx:
                tx.connection.execute("CREATE TABLE orders (id TEXT PRIMARY KEY, ref TEXT)")
            bare = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            bare.execute(f"PRAGMA synchronous = {synchronous}")
            bare.execute("CREATE TABLE bare (id INTEGER PRIMARY KEY, ref TEXT)")
            insert = "INSERT INTO orders VALUES (?, ?)"
            rates = compare(
                {
                    BASELINE: partial(bare.execute, "INSERT INTO bare (ref) VALUES ('o-42')"),
                    LEDGER: partial(ledger_write, ledger),
                    APART: partial(claim_apart_write, ledger),
                    TRANSACTIONAL: partial(transactional_write, ledger, insert),
                    ONE_TRANSACTION: partial(one_transaction_write, ledger, insert),
                }
            )
            report(f"SQLite {sqlite3.sqlite_version}, WAL, synchronous={synchronous}", rates)

            # SQLiteLedger's threads (a connection each, writers queued on a lock) vs one
            # lock around every whole ledger write: writes serialize on SQLite's write
            # lock either way; the outer lock also holds readers and the next claim.
            lock = threading.Lock()

            def locked(ledger: Ledger = ledger, lock: threading.Lock = lock) -> None:
                with lock:
                    ledger_write(ledger)

            for threads in (1, 4):
                both = compare(
                    {"per thread": partial(ledger_write, ledger), "one lock": locked}, threads
                )
                print(
                    f"  {threads} thread(s) of ledger writes: a connection per thread"
                    f" {both['per thread'][0]:>7,.0f}/s,"
                    f" one shared lock {both['one lock'][0]:>7,.0f}/s"
                )
            bare.close()
            ledger.close()


def bench_postgres() -> None:
    """PostgreSQL in a throwaway cluster, 1 to 8 threads each writing its own keys."""
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL: SKIPPED, no PostgreSQL binaries on this machine")
        return
    import psycopg  # noqa: PLC0415 - only when a server can run

    from toolbound.ledger.postgres import PostgresLedger  # noqa: PLC0415 - needs the extra

    with throwaway_cluster(bindir, databases=("bench",)) as cluster:
        conninfo = cluster.conninfo("bench")
        ledger = PostgresLedger(conninfo, pool_size=8)
        unchecked = PostgresLedger(conninfo, pool_size=8, check_connections=False)
        with ledger.atomic() as tx:
            tx.connection.execute("CREATE TABLE orders (id text PRIMARY KEY, ref text)")
            tx.connection.execute("CREATE TABLE bare (id bigserial PRIMARY KEY, ref text)")
            version = tx.connection.info.server_version
        insert = "INSERT INTO orders VALUES (%s, %s)"
        local = threading.local()
        bare_connections: list[psycopg.Connection[tuple[object, ...]]] = []

        def bare_insert() -> None:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = psycopg.connect(conninfo, autocommit=True)
                bare_connections.append(conn)
            conn.execute("INSERT INTO bare (ref) VALUES ('o-42')")

        for threads in (1, 2, 4, 8):
            rates = compare(
                {
                    BASELINE: bare_insert,
                    LEDGER: partial(ledger_write, ledger),
                    APART: partial(claim_apart_write, ledger),
                    TRANSACTIONAL: partial(transactional_write, ledger, insert),
                    ONE_TRANSACTION: partial(one_transaction_write, ledger, insert),
                    UNCHECKED: partial(ledger_write, unchecked),
                },
                threads,
            )
            report(
                f"PostgreSQL {version // 10000}.{version % 10000}, loopback, fsync=on,"
                f" synchronous_commit=on, {threads} thread(s) each writing its own keys",
                rates,
            )
        for conn in bare_connections:
            conn.close()
        unchecked.close()
        ledger.close()


if __name__ == "__main__":
    bench_sqlite()
    bench_postgres()
