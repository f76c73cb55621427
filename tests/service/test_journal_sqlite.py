"""The SQLite journal: its write-ahead log copied off the writers' path, its rows in order.

A commit is durable once it is in the WAL (``synchronous=NORMAL``); the copy into the
database file, which syncs that file, is a thread's own work, and ends with the journal.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from script_process import script_process
from toolbound.journal import JournalError, SQLiteJournal, StoredCall
from toolbound.service.core import new_invocation_id

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterator
    from pathlib import Path

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)


def _call(n: int) -> StoredCall:
    return StoredCall(
        invocation_id=f"inv-{n}",
        tenant="acme",
        subject="u1",
        principal="agent",
        tool="orders.lookup",
        status="observed",
        state="committed",
        digest=None,
        decision=None,
        approver=None,
        created_at=T0,
        updated_at=T0,
        body={"response": {"n": n}},
    )


def _checkpoint_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "toolbound-journal-checkpoints"]


def test_calls_reach_the_database_file_without_a_writer_checkpointing(tmp_path: Path) -> None:
    """Calls committed to the WAL are in the database file itself shortly after."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    try:
        for n in range(20):
            journal.put_call(_call(n), events=[{"at": T0.isoformat(), "kind": "proposal"}])
        deadline = time.monotonic() + 10
        count, attempt = 0, 0
        while time.monotonic() < deadline:
            # The file alone, without its WAL: only what a checkpoint copied is in it.
            attempt += 1
            copied = tmp_path / f"copy-{attempt}.db"
            shutil.copyfile(tmp_path / "journal.db", copied)
            with contextlib.closing(sqlite3.connect(copied)) as copy:
                tables = copy.execute("SELECT name FROM sqlite_master").fetchall()
                if ("toolbound_service_calls",) in tables:
                    row = copy.execute("SELECT count(*) FROM toolbound_service_calls").fetchone()
                    count = row[0]
            if count == 20:
                break
            time.sleep(0.05)
        assert count == 20
    finally:
        journal.close()


def test_closing_the_journal_stops_its_checkpoints(tmp_path: Path) -> None:
    """No thread outlives the journal it checkpoints."""
    before = len(_checkpoint_threads())
    journal = SQLiteJournal(tmp_path / "journal.db")
    assert len(_checkpoint_threads()) == before + 1
    journal.close()
    assert len(_checkpoint_threads()) == before


def test_invocation_ids_sort_as_the_calls_were_made() -> None:
    """The service's ids are 32 hex digits, later calls' after earlier ones', none twice."""
    ids = [new_invocation_id() for _ in range(200)]
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert len(set(ids)) == len(ids)
    assert [i[:16] for i in ids] == sorted(i[:16] for i in ids)


def test_only_held_calls_are_in_the_lease_index(tmp_path: Path) -> None:
    """A database whose lease index held every row gets one of held calls only; sweeps use it."""
    path = tmp_path / "journal.db"
    SQLiteJournal(path).close()
    with contextlib.closing(sqlite3.connect(path)) as old:
        # As the first releases made it.
        old.execute("DROP INDEX toolbound_service_calls_leased")
        old.execute(
            "CREATE INDEX toolbound_service_calls_by_lease ON toolbound_service_calls (lease_until)"
        )
        old.commit()
    journal = SQLiteJournal(path)
    try:
        journal.put_call(_call(1))
        journal.put_call(replace(_call(2), owner="p1"), lease=-1.0)
        assert [c.invocation_id for c in journal.expired()] == ["inv-2"]
    finally:
        journal.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        indexes = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'"))
        assert "toolbound_service_calls_by_lease" not in indexes
        assert "WHERE lease_until IS NOT NULL" in indexes["toolbound_service_calls_leased"]
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT invocation_id FROM toolbound_service_calls"
            " WHERE lease_until IS NOT NULL AND lease_until < 0 ORDER BY lease_until"
        ).fetchall()
        assert "toolbound_service_calls_leased" in str(plan)


def _hold_the_writer(journal: SQLiteJournal, held: threading.Event, free: threading.Event) -> None:
    with journal._tx():  # a write transaction left open, as a slow writer would
        held.set()
        free.wait(10)


def test_a_writer_waits_its_turn_behind_another_of_the_same_process(tmp_path: Path) -> None:
    """A write that finds another thread's transaction open runs once that one commits."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    held, free = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_the_writer, args=(journal, held, free))
    done: list[str] = []

    def write() -> None:
        journal.put_call(_call(1), events=[])
        done.append("written")

    try:
        holder.start()
        assert held.wait(10)
        writer = threading.Thread(target=write)
        writer.start()
        writer.join(0.3)
        assert done == []  # queued behind the open transaction
        free.set()
        writer.join(10)
        assert done == ["written"]
        assert journal.get_call("inv-1") is not None
    finally:
        free.set()
        holder.join(10)
        journal.close()


def test_a_writer_held_past_the_busy_timeout_is_a_storage_unavailable_error(
    tmp_path: Path,
) -> None:
    """Queued longer than ``busy_timeout``, a write fails as a store that cannot answer now."""
    journal = SQLiteJournal(tmp_path / "journal.db", busy_timeout=0.2)
    held, free = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_the_writer, args=(journal, held, free))
    try:
        holder.start()
        assert held.wait(10)
        with pytest.raises(JournalError) as refused:
            journal.put_call(_call(1), events=[])
        assert refused.value.code == "storage_unavailable"
        free.set()
        holder.join(10)
        journal.put_call(_call(1), events=[])  # the store answers again once it is free
        assert journal.get_call("inv-1") is not None
    finally:
        free.set()
        holder.join(10)
        journal.close()


_OTHER_PROCESS = """
import sys
from toolbound.journal import SQLiteJournal
journal = SQLiteJournal(sys.argv[1])
with journal._tx():
    print("held", flush=True)
    sys.stdin.readline()
print("committed", flush=True)
journal.close()
"""


@contextlib.contextmanager
def _other_process_writing(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process with the journal's write transaction open until told to commit."""
    with script_process(_OTHER_PROCESS, str(path), first="held") as process:
        yield process


def test_a_writer_of_another_process_is_waited_for_in_turn(tmp_path: Path) -> None:
    """Another process's open write transaction: a write here runs soon after it commits.

    The processes take turns on the file's ``-turns`` lock, tried again every fraction
    of a millisecond, instead of SQLite's busy handler, whose naps grow to 100 ms.
    """
    path = tmp_path / "journal.db"
    journal = SQLiteJournal(path)
    done: list[float] = []

    def write() -> None:
        journal.put_call(_call(1), events=[])
        done.append(time.monotonic())

    try:
        with _other_process_writing(path) as other:
            writer = threading.Thread(target=write)
            writer.start()
            writer.join(0.3)
            assert done == []  # waiting for the other process's transaction
            assert other.stdin is not None
            assert other.stdout is not None
            other.stdin.write("commit\n")
            other.stdin.flush()
            assert other.stdout.readline().strip() == "committed"
            committed = time.monotonic()
            writer.join(10)
        assert len(done) == 1
        assert done[0] - committed < 0.02  # SQLite's busy handler naps up to 100 ms
        assert journal.get_call("inv-1") is not None
    finally:
        journal.close()


def test_another_process_holding_its_turn_past_the_busy_timeout_is_storage_unavailable(
    tmp_path: Path,
) -> None:
    """The turn is waited for at most ``busy_timeout``: then a store that cannot answer now."""
    path = tmp_path / "journal.db"
    SQLiteJournal(path).close()
    journal = SQLiteJournal(path, busy_timeout=0.2)
    try:
        with _other_process_writing(path):
            started = time.monotonic()
            with pytest.raises(JournalError) as refused:
                journal.put_call(_call(1), events=[])
            assert refused.value.code == "storage_unavailable"
            assert time.monotonic() - started < 2
        journal.put_call(_call(1), events=[])  # the other process is gone, its turn with it
        assert journal.get_call("inv-1") is not None
    finally:
        journal.close()
