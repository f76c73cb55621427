"""R8: a tool whose effect lives in the ledger's database commits with its record.

Through a real runtime, on a real business table in SQLite and in PostgreSQL: the
effect and the ledger record commit together, or neither does.
"""

from __future__ import annotations

import pytest

from harness import Harness, spec
from toolbound._state import State
from toolbound.ledger.sqlite import SQLiteLedger

S = State


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """(ledger, placeholder style, a function counting business rows)."""
    if request.param == "sqlite":
        ledger = SQLiteLedger(tmp_path / "app.db")
        with ledger.atomic() as tx:
            tx.connection.execute("CREATE TABLE bookings (room TEXT)")

        def rows():
            with ledger.atomic() as tx:
                return tx.connection.execute("SELECT count(*) FROM bookings").fetchone()[0]

        yield ledger, "?", rows
    else:
        from toolbound.ledger.postgres import PostgresLedger

        ledger = PostgresLedger(request.getfixturevalue("pg_conninfo"))
        with ledger.atomic() as tx:
            tx.connection.execute("CREATE TABLE bookings (room text)")

        def rows():
            with ledger.atomic() as tx:
                return tx.connection.execute("SELECT count(*) FROM bookings").fetchone()[0]

        yield ledger, "%s", rows
    ledger.close()


def book(mark: str, *, fail: bool = False, extra: bool = False):
    def tool(args, ctx):
        # only the driver's placeholder is interpolated; the value is a parameter
        sql = f"INSERT INTO bookings VALUES ({mark})"  # noqa: S608
        ctx.transaction.execute(sql, (args["text"],))
        if fail:
            msg = "the room system refused after the insert"
            raise RuntimeError(msg)
        return {"text": args["text"], **({"sneaky": 1} if extra else {})}

    return tool


def harness(clock, ledger):
    return Harness(clock, ledger=ledger)


def test_effect_and_record_commit_together(clock, store):
    """Success: one business row, the record committed; a repeat replays, no second row."""
    ledger, mark, rows = store
    h = harness(clock, ledger)
    h.registry.register(spec("book", effect="reversible_write", transactional=True), book(mark))
    first = h.run("book", {"text": "A-12"})
    again = h.run("book", {"text": "A-12"})
    h.close()
    assert first.kind == "observed"
    assert ledger.find(first.invocation_id).phase == "committed"
    assert again.replayed_from == first.invocation_id
    assert rows() == 1


@pytest.mark.parametrize(
    ("kw", "code"),
    [({"fail": True}, "tool_error"), ({"extra": True}, "output_rejected")],
    ids=["tool raises after its insert", "result breaks its contract"],
)
def test_failure_rolls_back_effect_and_record(clock, store, kw, code):
    """A failure inside the transaction leaves neither the row nor the record."""
    ledger, mark, rows = store
    h = harness(clock, ledger)
    h.registry.register(
        spec("book", effect="reversible_write", transactional=True), book(mark, **kw)
    )
    out = h.run("book", {"text": "A-12"})
    h.close()
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.problem.code == code
    assert ledger.find(out.invocation_id) is None
    assert rows() == 0
