"""What a write asks of SQLite: the statements each ledger call runs (R8, R9).

A write is a claim before the tool and an advance after it, each durable on its own.
With a free key and no other writer, each is one statement that SQLite commits (and
fsyncs) by itself; only a taken key needs a read, and then the read and the decision
run under ``BEGIN IMMEDIATE``. The statements are read off the connection SQLite runs
them on, so these tests fail if a call grows a statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import ledger_support as support
from ledger_support import T0, result
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import Claimed, InFlight, Intent, LedgerKey

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

KEY = LedgerKey("acme/mira", "v1", "order-42")


def intent(invocation_id: str = "inv-1") -> Intent:
    return support.intent(KEY, invocation_id, session="s-1")


@pytest.fixture(params=["FULL", "NORMAL"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteLedger]:
    with SQLiteLedger(tmp_path / "ledger.db", synchronous=request.param) as opened:
        yield opened


def statements(ledger: SQLiteLedger) -> list[str]:
    """The first word of every statement this thread's connection runs from now on."""
    ran: list[str] = []
    ledger._connection().set_trace_callback(lambda sql: ran.append(sql.split()[0].upper()))
    return ran


def test_a_claim_on_a_free_key_is_one_insert_committed_on_its_own(ledger):
    """A free key: one INSERT, no BEGIN/COMMIT around it, and the record is there."""
    ran = statements(ledger)
    assert isinstance(ledger.claim_executing(intent(), now=T0), Claimed)
    assert ran == ["INSERT"]
    record = ledger.get(KEY)
    assert record is not None
    assert record.phase == "executing"


def test_an_advance_is_one_guarded_update(ledger):
    """The outcome after the tool: one UPDATE, its own transaction."""
    ledger.claim_executing(intent(), now=T0)
    ran = statements(ledger)
    ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=T0, result=result())
    assert ran == ["UPDATE"]
    record = ledger.get(KEY)
    assert record is not None
    assert record.phase == "committed"
    assert record.result == result()


def test_a_claim_on_a_taken_key_reads_it_under_the_write_lock(ledger):
    """A taken key: the INSERT changes nothing, then BEGIN IMMEDIATE, the read, COMMIT."""
    ledger.claim_executing(intent(), now=T0)
    ran = statements(ledger)
    answer = ledger.claim(intent("inv-2"), now=T0)
    assert answer == InFlight(invocation_id="inv-1", phase="executing")
    assert ran == ["INSERT", "BEGIN", "SELECT", "COMMIT"]


def test_an_advance_with_evidence_appends_it_in_the_same_statement(ledger):
    """Evidence (reconciliation) rides in the one UPDATE; earlier evidence is kept."""
    ledger.claim_executing(intent(), now=T0)
    ledger.advance(KEY, invocation_id="inv-1", phase="unknown", now=T0, evidence={"a": 1})
    ran = statements(ledger)
    ledger.advance(KEY, invocation_id="inv-1", phase="failed", now=T0, evidence={"b": "no"})
    assert ran == ["UPDATE"]
    record = ledger.get(KEY)
    assert record is not None
    assert record.evidence == ({"a": 1}, {"b": "no"})


def test_the_wal_is_checkpointed_by_a_thread_not_by_the_writers(tmp_path: Path):
    """Writers leave the copy into the file to the ledger's thread; close() stops it."""
    import time

    from toolbound._wal import WAL_BOUND

    path = tmp_path / "ledger.db"
    with SQLiteLedger(path) as ledger:
        assert ledger._connection().execute("PRAGMA wal_autocheckpoint").fetchone() == (WAL_BOUND,)
        before = path.stat().st_size
        for n in range(100):
            key = LedgerKey("acme/mira", "v1", f"order-{n}")
            bulky = Intent(
                key=key,
                digest="digest-a",
                invocation_id=f"inv-{n}",
                tool="orders.create@v1",
                canonical=b'{"note":"' + b"x" * 2000 + b'"}',
                subject={"id": "mira", "tenant": "acme", "session": None},
                deadline=T0,
            )
            assert isinstance(ledger.claim_executing(bulky, now=T0), Claimed)
        # About 100 pages of records in the WAL: far below the bound, so only the
        # thread copies them into the file.
        deadline = time.monotonic() + 10
        while path.stat().st_size <= before + 50 * 4096:
            assert time.monotonic() < deadline, "the WAL was never checkpointed"
            time.sleep(0.02)
        thread = ledger._checkpoints._thread  # type: ignore[union-attr]
    assert not thread.is_alive()
