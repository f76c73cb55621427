"""The journal's one record per call — a head and its append-only events — on every store.

One suite, run unchanged against SQLite and PostgreSQL (R19): events follow the head
in one transaction and are never rewritten; a decision is one compare-and-set and
one event, once across processes; retention removes whole calls and never one a
person or a recovery still has to act on; a database an older release wrote (the
trace inside the head's body) is brought forward when it is opened.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from toolbound.journal import (
    Journal,
    JournalError,
    PostgresJournal,
    SQLiteJournal,
    StoredCall,
    call_event,
    schema,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def open_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Journal]]:
    """Open (another) journal over this test's storage: same file, or same schema."""
    opened: list[Journal] = []

    def make() -> Journal:
        if request.param == "sqlite":
            journal: Journal = SQLiteJournal(tmp_path / "journal.db")
        else:
            journal = PostgresJournal(request.getfixturevalue("pg_conninfo"))
        opened.append(journal)
        return journal

    yield make
    for journal in opened:
        journal.close()


@pytest.fixture
def journal(open_journal: Callable[[], Journal]) -> Journal:
    return open_journal()


def head(invocation_id: str = "inv-1", **kw: object) -> StoredCall:
    fields: dict[str, object] = {
        "invocation_id": invocation_id,
        "tenant": "acme",
        "subject": "mira",
        "principal": "agent",
        "tool": "notes.send",
        "status": "running",
        "state": "proposed",
        "digest": None,
        "decision": None,
        "approver": None,
        "created_at": T0,
        "updated_at": T0,
        "body": {"request": {"tool": "notes.send"}},
    }
    fields.update(kw)
    return StoredCall(**fields)  # type: ignore[arg-type]


def event(kind: str, n: int, state: str | None = None) -> dict[str, object]:
    return call_event(kind, T0 + timedelta(milliseconds=n), {"n": n}, state=state)


def parked(journal: Journal, invocation_id: str = "inv-1") -> None:
    journal.put_call(
        head(
            invocation_id,
            status="awaiting_confirmation",
            state="awaiting_confirmation",
            digest="d" * 64,
        ),
        events=[event("proposal", 0), event("transition", 1, "awaiting_confirmation")],
    )


def test_a_head_and_its_events_are_written_together_in_order(journal: Journal) -> None:
    """Events are numbered from 0 within the call; a later write appends after them."""
    journal.put_call(head(), events=[event("proposal", 0), event("transition", 1, "validated")])
    journal.put_call(
        head(status="observed", state="observed"),
        events=[event("transition", 2, "observed"), event("tool_message", 3)],
    )
    events = journal.events("inv-1")
    assert [(e["seq"], e["kind"], e["data"]) for e in events] == [
        (0, "proposal", {"n": 0}),
        (1, "transition", {"n": 1}),
        (2, "transition", {"n": 2}),
        (3, "tool_message", {"n": 3}),
    ]
    stored = journal.get_call("inv-1")
    assert stored is not None
    assert (stored.status, stored.state) == ("observed", "observed")
    assert "trace" not in stored.body


def test_a_long_trace_is_written_whole_and_in_order(journal: Journal) -> None:
    """More events than one statement takes: every one kept, numbered in the order given."""
    journal.put_call(head(), events=[event("transition", n) for n in range(3)])
    journal.put_call(head(), events=[event("transition", n) for n in range(3, 503)])
    events = journal.events("inv-1")
    assert [(e["seq"], e["data"]) for e in events] == [(n, {"n": n}) for n in range(503)]


def test_rewriting_the_head_never_touches_its_events(journal: Journal) -> None:
    """A head written again without events leaves the trace exactly as it was."""
    journal.put_call(head(), events=[event("proposal", 0)])
    before = journal.events("inv-1")
    journal.put_call(head(status="interrupted", body={"note": {"reason": "x"}}))
    assert journal.events("inv-1") == before
    assert journal.events("no-such-call") == []


def test_a_head_refused_to_a_non_owner_appends_nothing(journal: Journal) -> None:
    """The head and its events are one transaction: a refused write leaves neither."""
    journal.put_call(head(owner="replica-a"), events=[event("proposal", 0)], lease=30)
    with pytest.raises(JournalError) as refused:
        journal.put_call(
            head(owner="replica-b", status="observed"), events=[event("tool_message", 1)]
        )
    assert refused.value.code == "not_owner"
    assert [e["kind"] for e in journal.events("inv-1")] == ["proposal"]
    assert journal.get_call("inv-1").status == "running"  # type: ignore[union-attr]


def test_a_decision_is_an_event_bound_to_the_digest_shown(journal: Journal) -> None:
    """Deciding appends who, when, which way, the digest and the reason to the trace."""
    parked(journal)
    decided = journal.decide("inv-1", decision="denied", approver="ana", now=T0, reason="not today")
    assert (decided.decision, decided.approver) == ("denied", "ana")
    last = journal.events("inv-1")[-1]
    assert (last["seq"], last["kind"], last["at"]) == (2, "decision", T0.isoformat())
    assert last["data"] == {
        "decision": "denied",
        "approver": "ana",
        "digest": "d" * 64,
        "reason": "not today",
    }


def test_a_second_decision_is_refused_and_appends_nothing(journal: Journal) -> None:
    """R7: one decision per call; the loser's attempt leaves no event."""
    parked(journal)
    journal.decide("inv-1", decision="approved", approver="ana", now=T0, digest="e" * 64)
    with pytest.raises(JournalError) as refused:
        journal.decide("inv-1", decision="denied", approver="bo", now=T0)
    assert refused.value.code == "already_decided"
    decisions = [e for e in journal.events("inv-1") if e["kind"] == "decision"]
    assert [d["data"]["approver"] for d in decisions] == ["ana"]  # type: ignore[index]
    assert decisions[0]["data"]["digest"] == "e" * 64  # type: ignore[index]


def test_racing_decisions_from_two_processes_record_exactly_one(
    open_journal: Callable[[], Journal],
) -> None:
    """Several stores deciding one call at once: one wins, one decision event is kept."""
    first = open_journal()
    parked(first)
    racers = [first, open_journal(), open_journal(), open_journal()]
    barrier = threading.Barrier(len(racers))
    won: list[str] = []
    refused: list[str] = []

    def decide(n: int, journal: Journal) -> None:
        barrier.wait()
        try:
            journal.decide("inv-1", decision="approved", approver=f"p{n}", now=T0)
        except JournalError as exc:
            refused.append(exc.code)
        else:
            won.append(f"p{n}")

    threads = [threading.Thread(target=decide, args=(n, j)) for n, j in enumerate(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert refused == ["already_decided"] * (len(racers) - 1)
    decisions = [e for e in first.events("inv-1") if e["kind"] == "decision"]
    assert [d["data"]["approver"] for d in decisions] == won  # type: ignore[index]
    assert first.get_call("inv-1").approver == won[0]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("status", "kept"),
    [
        ("observed", False),
        ("rejected", False),
        ("interrupted", False),
        ("reconciled_committed", False),
        ("awaiting_confirmation", True),
        ("outcome_unknown", True),
        ("running", True),
    ],
)
def test_retention_removes_whole_calls_and_never_one_still_to_act_on(
    journal: Journal, status: str, *, kept: bool
) -> None:
    """A call past retention goes with all its events; parked and unknown ones stay."""
    journal.put_call(head("old", status=status), events=[event("proposal", 0), event("x", 1)])
    journal.put_call(
        head("new", status="observed", updated_at=T0 + timedelta(days=2)),
        events=[event("proposal", 0)],
    )
    removed = journal.purge(before=T0 + timedelta(days=1))
    assert removed == (0 if kept else 1)
    assert (journal.get_call("old") is not None) is kept
    assert len(journal.events("old")) == (2 if kept else 0)
    assert len(journal.events("new")) == 1


def test_an_older_database_has_its_traces_moved_into_events_once(
    request: pytest.FixtureRequest, tmp_path: Path, open_journal: Callable[[], Journal]
) -> None:
    """A head an older release wrote, trace inside its body, is read as events after opening.

    The move is done once per database; a trace written the old way later is still read.
    """
    trace = [
        {"seq": 0, "at": T0.isoformat(), "kind": "proposal", "state": None, "data": {"a": 1}},
        {"seq": 1, "at": T0.isoformat(), "kind": "tool_message", "state": None, "data": {}},
    ]
    body = {"request": {"tool": "t"}, "response": {"trace_id": "x"}, "trace": trace}
    old_table = (
        "CREATE TABLE toolbound_service_calls (invocation_id TEXT PRIMARY KEY,"
        " tenant TEXT NOT NULL, subject TEXT NOT NULL, principal TEXT NOT NULL,"
        " tool TEXT NOT NULL, status TEXT NOT NULL, state TEXT NOT NULL, digest TEXT,"
        " decision TEXT, approver TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,"
        " body TEXT NOT NULL, owner TEXT, lease_until DOUBLE PRECISION, request_key TEXT,"
        " surface TEXT)"
    )
    insert = (
        "INSERT INTO toolbound_service_calls (invocation_id, tenant, subject, principal,"
        " tool, status, state, created_at, updated_at, body) VALUES"
        " ('old', 'acme', 'mira', 'agent', 't', 'observed', 'observed', ?, ?, ?)"
    )
    values = (T0.isoformat(), T0.isoformat(), json.dumps(body))
    if "sqlite" in request.node.callspec.id:
        with sqlite3.connect(tmp_path / "journal.db") as conn:
            conn.execute(old_table)
            conn.execute(insert, values)
    else:
        import psycopg

        with psycopg.connect(request.getfixturevalue("pg_conninfo"), autocommit=True) as conn:
            conn.execute(old_table.encode())
            conn.execute(insert.replace("?", "%s").encode(), values)
    journal = open_journal()
    assert [e["kind"] for e in journal.events("old")] == ["proposal", "tool_message"]
    assert journal.events("old")[0]["data"] == {"a": 1}
    assert journal.get_call("old").body == {  # type: ignore[union-attr]
        "request": {"tool": "t"},
        "response": {"trace_id": "x"},
    }
    # Opened again (another process): nothing is moved twice.
    open_journal()
    assert len(journal.events("old")) == 2
    # A replica of the older release, still running, writes its trace into a head
    # after the move: read from there, in the same shape.
    with journal._tx() as cur:  # type: ignore[attr-defined]
        cur.execute(journal._q(insert.replace("'old'", "'late'")), values)  # type: ignore[attr-defined]
    assert journal.events("late") == journal.events("old")
    open_journal()  # the move ran once: opening does not scan every head again
    assert "trace" in journal.get_call("late").body  # type: ignore[union-attr]


def test_a_journal_a_newer_release_wrote_is_refused_and_left_as_it_was(
    open_journal: Callable[[], Journal],
) -> None:
    """A database marked with a format above this release's is not opened, nor changed."""
    journal = open_journal()
    journal.put_call(head(status="observed"), events=[event("proposal", 0)])
    newer = f"format-{schema.FORMAT + 1}"
    with journal._tx() as cur:  # type: ignore[attr-defined]  # as a newer release marks it
        cur.execute(f"INSERT INTO toolbound_journal_migrations (name) VALUES ('{newer}')")  # noqa: S608

    threads = threading.active_count()
    with pytest.raises(JournalError) as refused:
        open_journal()

    assert threading.active_count() == threads  # a pool opened for it is closed again
    assert refused.value.code == "unsupported_schema"
    assert f"format {schema.FORMAT + 1}" in str(refused.value)
    with journal._tx() as cur:  # type: ignore[attr-defined]
        cur.execute("SELECT name FROM toolbound_journal_migrations ORDER BY name")
        assert [row[0] for row in cur.fetchall()] == [newer, "trace_events"]
    assert [e["kind"] for e in journal.events("inv-1")] == ["proposal"]


def test_a_format_mark_this_release_knows_opens_as_before(
    open_journal: Callable[[], Journal],
) -> None:
    """Marks up to this release's format, and names that are not a format, are no bar."""
    journal = open_journal()
    with journal._tx() as cur:  # type: ignore[attr-defined]
        for name in (f"format-{schema.FORMAT}", "format-next", "formatted"):
            cur.execute(f"INSERT INTO toolbound_journal_migrations (name) VALUES ('{name}')")  # noqa: S608

    again = open_journal()

    again.put_call(head(), events=[event("proposal", 0)])
    assert [e["kind"] for e in journal.events("inv-1")] == ["proposal"]


def test_other_modules_add_their_tables_to_the_journals_schema(
    open_journal: Callable[[], Journal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement given to extend_schema runs whenever a journal opens, idempotently."""
    monkeypatch.setattr(schema, "SCHEMA", list(schema.SCHEMA))
    schema.extend_schema("CREATE TABLE IF NOT EXISTS toolbound_test_extra (k TEXT PRIMARY KEY)")
    schema.extend_schema("CREATE TABLE IF NOT EXISTS toolbound_test_extra (k TEXT PRIMARY KEY)")
    journal = open_journal()
    open_journal()
    with journal._tx() as cur:  # type: ignore[attr-defined]
        cur.execute("INSERT INTO toolbound_test_extra (k) VALUES ('x')")
        cur.execute("SELECT k FROM toolbound_test_extra")
        assert cur.fetchall() == [("x",)]


# -- the feed of notices (Journal.notices) -------------------------------------------------


def test_a_call_s_notices_follow_what_happened_to_it_once_each(journal: Journal) -> None:
    """Parked, decided, finished: one notice each, in order, whatever is written twice."""
    parked(journal)
    parked(journal)  # the same status written again gives no second notice
    journal.decide("inv-1", decision="approved", approver="ana", now=T0)
    journal.put_call(head(status="running", state="prepared", decision="approved"))
    journal.put_call(head(status="observed", state="observed", decision="approved"))
    notices = journal.notices("acme")
    assert [(n.kind, n.invocation_id) for n in notices] == [
        ("parked", "inv-1"),
        ("decided", "inv-1"),
        ("finished", "inv-1"),
    ]
    decided = notices[1].body
    assert (decided["decision"], decided["approver"]) == ("approved", "ana")
    assert notices[2].body["status"] == "observed"


def test_only_what_someone_may_wait_for_is_noticed(journal: Journal) -> None:
    """A call that ends without a person gives no notice; an unknown outcome does."""
    journal.put_call(head("read", status="observed", state="observed"))
    journal.put_call(head("lost", status="outcome_unknown", state="outcome_unknown"))
    journal.put_call(head("lost", status="reconciled_committed", state="committed"))
    assert [(n.kind, n.invocation_id) for n in journal.notices("acme")] == [
        ("outcome_unknown", "lost"),
        ("reconciled", "lost"),
    ]


def test_a_reader_goes_on_after_its_cursor_and_sees_only_its_tenant(journal: Journal) -> None:
    """Reading after the last cursor returns only what came after; other tenants never."""
    parked(journal, "inv-1")
    journal.put_call(head("theirs", tenant="globex", status="awaiting_confirmation"))
    first = journal.notices("acme")
    assert [n.invocation_id for n in first] == ["inv-1"]
    assert journal.notices("acme", after=first[-1].cursor) == []
    parked(journal, "inv-2")
    parked(journal, "inv-3")
    page = journal.notices("acme", after=first[-1].cursor, limit=1)
    assert [n.invocation_id for n in page] == ["inv-2"]
    rest = journal.notices("acme", after=page[-1].cursor)
    assert [n.invocation_id for n in rest] == ["inv-3"]
    assert [n.invocation_id for n in journal.notices("globex")] == ["theirs"]


def test_a_cursor_that_is_not_one_is_refused(journal: Journal) -> None:
    """A malformed cursor is a JournalError with the code bad_cursor."""
    with pytest.raises(JournalError) as refused:
        journal.notices("acme", after="yesterday")
    assert refused.value.code == "bad_cursor"


def test_notices_written_by_another_process_are_read_in_order(
    open_journal: Callable[[], Journal],
) -> None:
    """Two journals on one store: each one's notices reach the other's reader, none lost."""
    one, two = open_journal(), open_journal()
    seen: list[str] = []
    cursor: str | None = None

    def writer(journal: Journal, prefix: str) -> None:
        for i in range(20):
            parked(journal, f"{prefix}-{i}")

    threads = [
        threading.Thread(target=writer, args=(one, "a")),
        threading.Thread(target=writer, args=(two, "b")),
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while len(seen) < 40 and time.monotonic() < deadline:
        batch = one.notices("acme", after=cursor)
        seen += [n.invocation_id for n in batch]
        cursor = batch[-1].cursor if batch else cursor
    for t in threads:
        t.join()
    assert one.notices("acme", after=cursor) == []
    assert sorted(seen) == sorted([f"a-{i}" for i in range(20)] + [f"b-{i}" for i in range(20)])
    assert len(seen) == len(set(seen))


def test_retention_removes_a_purged_call_s_notices(journal: Journal) -> None:
    """A whole call goes with its notices; a call still kept keeps them."""
    journal.put_call(head("old", status="outcome_unknown", state="outcome_unknown"))
    journal.put_call(head("old", status="reconciled_committed", state="committed"))
    parked(journal, "waiting")
    journal.purge(before=T0 + timedelta(days=1))
    assert [n.invocation_id for n in journal.notices("acme")] == ["waiting"]


# -- the inbox: another surface's parked call, held by its holder --------------------------


def held(journal: Journal, *, lease: float = 30.0, invocation_id: str = "inv-9") -> StoredCall:
    """A call a gateway parked: owned by its holder, leased, its request where the desk looks."""
    call = head(
        invocation_id,
        status="awaiting_confirmation",
        state="awaiting_confirmation",
        digest="d" * 64,
        owner="gw-1",
        surface="mcp-gateway",
        body={"request": {"tool": "notes.send"}, "confirmation": {"digest": "d" * 64}},
    )
    journal.put_call(call, events=[call_event("proposal", T0, {})], lease=lease)
    return call


def test_a_held_call_decided_elsewhere_is_adopted_once_by_its_holder(journal: Journal) -> None:
    """Decide (no owner) → decided_for(holder) → adopt_decided: running, and only once."""
    held(journal)
    journal.decide("inv-9", decision="approved", approver="ana", now=T0)
    assert journal.get_call("inv-9").owner == "gw-1"  # type: ignore[union-attr]
    assert [c.invocation_id for c in journal.decided_for("gw-1")] == ["inv-9"]
    assert journal.decided_for("gw-2") == []
    assert journal.adopt_decided("inv-9", "gw-2", lease=30) is None  # its holder lives
    adopted = journal.adopt_decided("inv-9", "gw-1", lease=30)
    assert adopted is not None
    assert (adopted.status, adopted.owner, adopted.decision) == ("running", "gw-1", "approved")
    assert journal.adopt_decided("inv-9", "gw-1", lease=30) is None
    assert journal.decided_for("gw-1") == []


def test_an_undecided_call_is_never_adopted(journal: Journal) -> None:
    """Nobody decided it: no process may run it, its holder's lease passed or not."""
    held(journal, lease=0.01)
    time.sleep(0.05)
    assert journal.adopt_decided("inv-9", "gw-2", lease=30) is None


def test_a_decision_after_the_holder_is_gone_is_refused_and_recorded_nowhere(
    journal: Journal,
) -> None:
    """The lease passed: holder_gone, no decision, no event; a live one takes it."""
    held(journal, lease=0.01, invocation_id="gone")
    held(journal, invocation_id="alive")
    time.sleep(0.05)
    with pytest.raises(JournalError) as refused:
        journal.decide("gone", decision="approved", approver="ana", now=T0)
    assert refused.value.code == "holder_gone"
    assert journal.get_call("gone").decision is None  # type: ignore[union-attr]
    assert [e["kind"] for e in journal.events("gone")] == ["proposal"]
    journal.decide("alive", decision="denied", approver="ana", now=T0, reason="no")
    assert journal.get_call("alive").decision == "denied"  # type: ignore[union-attr]


def test_recovery_takes_over_only_the_services_calls(journal: Journal) -> None:
    """expired() and take_over() never see another surface's call, however stale."""
    held(journal, lease=0.01)
    journal.put_call(head("svc", owner="dead-service"), lease=0.01)
    time.sleep(0.05)
    assert [c.invocation_id for c in journal.expired()] == ["svc"]
    assert journal.take_over("inv-9", "replica", lease=30) is None
    assert journal.take_over("svc", "replica", lease=30) is not None


def test_a_holders_own_decision_and_one_from_elsewhere_race_and_one_wins(
    open_journal: Callable[[], Journal],
) -> None:
    """The holder deciding (running at once) and the service deciding: exactly one."""
    first = open_journal()
    held(first)
    second = open_journal()
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def here() -> None:
        barrier.wait()
        try:
            first.decide(
                "inv-9", decision="approved", approver="at-client", now=T0,
                owner="gw-1", lease=30, running=True,
            )  # fmt: skip
            outcomes["here"] = "won"
        except JournalError as exc:
            outcomes["here"] = exc.code

    def elsewhere() -> None:
        barrier.wait()
        try:
            second.decide("inv-9", decision="approved", approver="ana", now=T0)
            outcomes["elsewhere"] = "won"
        except JournalError as exc:
            outcomes["elsewhere"] = exc.code

    threads = [threading.Thread(target=here), threading.Thread(target=elsewhere)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes.values()) == ["already_decided", "won"]
    call = first.get_call("inv-9")
    assert call is not None
    # Decided here: running already, nothing to hand over; decided elsewhere: handed over.
    assert call.status == ("running" if outcomes["here"] == "won" else "awaiting_confirmation")
    assert len([e for e in first.events("inv-9") if e["kind"] == "decision"]) == 1
