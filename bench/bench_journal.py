"""Recording one call in the journal: its events in one transaction with the head.

A call's record is a head row and its trace as events (``toolbound_call_events``).
Each write puts the head and the events a step produced in one transaction, the
events as one batch insert. The baseline is the same record written with a commit
per event (what appending each event as it happens would cost), in the same run,
on the same store. Ratios are baseline time / measured time per call (higher is
better). Reading a call's trace back is timed too.

PostgreSQL runs in a throwaway cluster on loopback, started here (the tests' helper).
Run: ``python bench/bench_journal.py`` (add ``--quick`` for a smoke run).
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pgcluster import find_bindir, throwaway_cluster
from toolbound.journal import PostgresJournal, SQLiteJournal, StoredCall, call_event

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound.journal import Journal

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
QUICK = "--quick" in sys.argv
CALLS = 50 if QUICK else 300
EVENTS = 12
"""About what a read's trace holds: proposal, gates, attempt, answer."""
_ids = count()


def _head(invocation_id: str) -> StoredCall:
    return StoredCall(
        invocation_id=invocation_id,
        tenant="acme",
        subject="mira",
        principal="agent",
        tool="orders.lookup@v1",
        status="observed",
        state="observed",
        digest="d" * 64,
        decision=None,
        approver=None,
        created_at=T0,
        updated_at=T0,
        body={"request": {"arguments": "x" * 200}, "response": {"message": "y" * 300}},
    )


_TRACE = [call_event("transition", T0, {"detail": "z" * 80}) for _ in range(EVENTS)]


def one_transaction(journal: Journal) -> None:
    """The head and every event of the step: one commit."""
    journal.put_call(_head(f"c{next(_ids)}"), events=_TRACE)


def commit_per_event(journal: Journal) -> None:
    """The baseline: the head rewritten and one event appended, a commit each."""
    head = _head(f"c{next(_ids)}")
    for event in _TRACE:
        journal.put_call(head, events=[event])


def per_call_us(journal: Journal, op: Callable[[Journal], None]) -> float:
    """Mean µs per call of ``op`` over ``CALLS`` calls."""
    t0 = time.perf_counter()
    for _ in range(CALLS):
        op(journal)
    return (time.perf_counter() - t0) / CALLS * 1e6


def read_us(journal: Journal) -> float:
    """Mean µs to read one call's trace back."""
    ids = [f"c{n}" for n in range(CALLS)]
    t0 = time.perf_counter()
    for invocation_id in ids:
        journal.events(invocation_id)
    return (time.perf_counter() - t0) / len(ids) * 1e6


def report(name: str, journal: Journal) -> None:
    """One line: both ways of writing, their ratio, and the read."""
    batch = per_call_us(journal, one_transaction)
    base = per_call_us(journal, commit_per_event)
    print(
        f"{name:10} one transaction {batch:8.0f} µs/call   commit per event {base:8.0f} µs/call"
        f"   ratio {base / batch:5.1f}x   trace read {read_us(journal):6.0f} µs"
    )


def main() -> None:
    """SQLite in a temporary file, then PostgreSQL in a throwaway cluster."""
    print(f"{CALLS} calls of {EVENTS} events each")
    with tempfile.TemporaryDirectory() as tmp:
        journal = SQLiteJournal(Path(tmp) / "journal.db")
        try:
            report("sqlite", journal)
        finally:
            journal.close()
    bindir = find_bindir()
    if bindir is None:
        print("postgres  skipped: no PostgreSQL binaries")
        return
    with throwaway_cluster(bindir, databases=("bench",)) as cluster:
        journal = PostgresJournal(cluster.conninfo("bench"))
        try:
            report("postgres", journal)
        finally:
            journal.close()


if __name__ == "__main__":
    main()
