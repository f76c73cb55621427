"""What a write asks of PostgreSQL: one prepared statement per phase (R8, R9, R19).

Outside ``atomic()`` the ledger holds its connection alone, so the claim's ``INSERT``
and the advance's ``UPDATE`` are prepared once per session and then run by name, each
committing on its own. These tests read the session's prepared statements off the
server, take them away under the ledger, write and read in a session encoding other than UTF-8,
and damage the table under statements already prepared.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING

import pytest

from ledger_support import T0, intent, result
from toolbound.ledger.store import Claimed, LedgerError, LedgerKey, Replay

if TYPE_CHECKING:
    from collections.abc import Iterator

    from toolbound.ledger.postgres import PostgresLedger


def write(ledger: PostgresLedger, n: int, *, who: str = "mira", value: object = "o-42") -> None:
    """One write as the runtime makes it: claimed as executing, then committed."""
    key, inv = LedgerKey("acme/mira", "v1", f"order-{n}"), f"inv-{n}"
    assert ledger.claim_executing(intent(key, inv, who=who), now=T0) == Claimed()
    ledger.advance(key, invocation_id=inv, phase="committed", now=T0, result=result(inv, value))


@pytest.fixture
def one_connection(pg_conninfo: str) -> Iterator[PostgresLedger]:
    """A ledger whose every call runs on the same session (a pool of one)."""
    from toolbound.ledger.postgres import PostgresLedger

    with PostgresLedger(pg_conninfo, pool_size=1) as ledger:
        yield ledger


def prepared(ledger: PostgresLedger) -> set[str]:
    """The ledger's statements prepared on its (only) session, by label.

    Each name ends with the digest of the statement's own text (checked here): the
    label is what is left.
    """
    with ledger.atomic() as tx:
        rows = tx.connection.execute(
            "SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'toolbound%'"
        ).fetchall()
    labels = set()
    for name, text in rows:
        label, _, digest = name.rpartition("_")
        assert digest == hashlib.blake2s(text.encode(), digest_size=4).hexdigest()
        labels.add(label)
    return labels


def test_a_write_is_two_statements_prepared_once_per_session(one_connection):
    """Claim and commit run as named prepared statements; later writes reuse them."""
    write(one_connection, 1)
    assert prepared(one_connection) == {"toolbound_claim", "toolbound_advance_committed"}
    write(one_connection, 2)
    write(one_connection, 3)
    assert prepared(one_connection) == {"toolbound_claim", "toolbound_advance_committed"}
    record = one_connection.get(LedgerKey("acme/mira", "v1", "order-3"))
    assert record is not None
    assert (record.phase, record.result) == ("committed", result("inv-3"))
    assert (record.canonical, record.subject["session"]) == (b'{"item":"tea","qty":1}', None)


def test_statements_deallocated_under_the_ledger_are_prepared_again(one_connection):
    """DEALLOCATE ALL on the ledger's session: the next write prepares again and succeeds."""
    write(one_connection, 1)
    with one_connection.atomic() as tx:
        tx.connection.execute("DEALLOCATE ALL")
    assert prepared(one_connection) == set()

    write(one_connection, 2)

    record = one_connection.get(LedgerKey("acme/mira", "v1", "order-2"))
    assert record is not None
    assert record.phase == "committed"


def test_a_write_inside_atomic_commits_with_the_transaction(one_connection):
    """Joined to atomic(): the same statements, committed by the block's own commit."""
    key = LedgerKey("acme/mira", "v1", "order-1")
    with one_connection.atomic() as tx:
        tx.connection.execute("DEALLOCATE ALL")  # the tool's own statements may do this
        assert tx.claim(intent(key, "inv-1"), now=T0) == Claimed()
        tx.advance(key, invocation_id="inv-1", phase="executing", now=T0)
        tx.advance(key, invocation_id="inv-1", phase="committed", now=T0, result=result("inv-1"))
    record = one_connection.get(key)
    assert record is not None
    assert (record.phase, record.result) == ("committed", result("inv-1"))


def test_text_is_sent_in_the_sessions_encoding(pg_conninfo, pg_admin):
    """A LATIN1 session: keys, subject and result outside ASCII are stored unchanged."""
    from toolbound.ledger.postgres import PostgresLedger

    with PostgresLedger(f"{pg_conninfo} client_encoding=LATIN1", pool_size=1) as ledger:
        key = LedgerKey("acme/zoë", "v1", "café-1")
        assert ledger.claim_executing(intent(key, "inv-é", who="zoë"), now=T0) == Claimed()
        ledger.advance(
            key, invocation_id="inv-é", phase="committed", now=T0, result=result("inv-é", "crème")
        )
        with ledger.atomic() as tx:
            schema = tx.connection.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    # Read back through a UTF-8 session: the server converted what the ledger sent.
    from psycopg import sql

    query = sql.SQL(
        "SELECT scope, key, invocation_id, subject->>'id', result->'value'->>'order', phase"
        " FROM {}.toolbound_ledger"
    ).format(sql.Identifier(schema[0]))
    row = pg_admin.execute(query).fetchall()
    assert row == [("acme/zoë", "café-1", "inv-é", "zoë", "crème", "committed")]


def test_records_are_read_in_the_sessions_encoding(pg_conninfo):
    """A LATIN1 session reads back what it wrote: get, find, a repeated claim, unresolved."""
    from toolbound.ledger.postgres import PostgresLedger

    with PostgresLedger(f"{pg_conninfo} client_encoding=LATIN1", pool_size=1) as ledger:
        done, lost = LedgerKey("acme/zoë", "v1", "café-1"), LedgerKey("acme/zoë", "v1", "café-2")
        assert ledger.claim_executing(intent(done, "inv-é", who="zoë"), now=T0) == Claimed()
        ledger.advance(
            done, invocation_id="inv-é", phase="committed", now=T0, result=result("inv-é", "crème")
        )
        assert ledger.claim_executing(intent(lost, "inv-ü", who="zoë"), now=T0) == Claimed()
        ledger.advance(
            lost, invocation_id="inv-ü", phase="unknown", now=T0, evidence={"why": "délai"}
        )

        record = ledger.get(done)
        again = ledger.claim_executing(intent(done, "inv-2", who="zoë"), now=T0)
        found = ledger.find("inv-é")
        unresolved = ledger.unresolved()

    assert record is not None
    assert record.subject["id"] == "zoë"
    assert record.result == result("inv-é", "crème")
    assert again == Replay(invocation_id="inv-é", result=result("inv-é", "crème"))
    assert found == record
    assert [(r.key, r.subject["id"]) for r in unresolved] == [(lost, "zoë")]
    assert unresolved[0].evidence[-1]["why"] == "délai"


def test_a_damaged_table_under_prepared_statements_is_corrupt_store(one_connection, pg_admin):
    """Columns dropped after the statements were prepared: corrupt_store, not a crash."""
    write(one_connection, 1)
    with one_connection.atomic() as tx:
        schema = tx.connection.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    pg_admin.execute(f"ALTER TABLE {schema[0]}.toolbound_ledger DROP COLUMN evidence".encode())

    with pytest.raises(LedgerError) as err:
        write(one_connection, 2)

    assert err.value.code == "corrupt_store"


@pytest.mark.parametrize(
    "instant",
    [
        datetime(2026, 7, 19, 6, 0, 0, 123456, tzinfo=UTC),
        datetime(2026, 7, 19, 8, 0, tzinfo=timezone(timedelta(hours=2))),
        datetime(2026, 7, 19, 0, 9, 21, 7, tzinfo=timezone(timedelta(minutes=9, seconds=21))),
        datetime(1, 1, 2, tzinfo=UTC),
        datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=UTC),
    ],
    ids=["micro", "plus-two", "offset-seconds", "year-1", "year-9999"],
)
def test_instants_are_stored_exactly_whatever_their_zone(one_connection, instant):
    """Deadline and timestamps sent as text come back as the same instant, to the µs."""
    key = LedgerKey("acme/mira", "v1", "order-1")
    at_deadline = replace(intent(key, "inv-1"), deadline=instant)
    assert one_connection.claim_executing(at_deadline, now=instant) == Claimed()
    one_connection.advance(key, invocation_id="inv-1", phase="committed", now=instant)
    record = one_connection.get(key)
    assert record is not None
    assert (record.deadline, record.created_at, record.updated_at) == (instant,) * 3
