"""Bad input and faults at the ledger (R8, R19).

Clear errors, nothing acknowledged lost, nothing reported recorded that was not.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from toolbound._errors import ConfigurationError
from toolbound._model import Result
from toolbound.ledger.migrations import MIGRATIONS, SCHEMA_VERSION
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import Claimed, Intent, LedgerError, LedgerKey

T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
KEY = LedgerKey("acme/mira", "v1", "key-1")


def intent(key: LedgerKey = KEY, *, invocation_id: str = "inv-1", size: int = 16) -> Intent:
    return Intent(
        key=key,
        digest="digest-a",
        invocation_id=invocation_id,
        tool="orders.create@v1",
        canonical=b'{"note":"' + b"x" * size + b'"}',
        subject={"id": "mira", "tenant": "acme", "session": None},
        deadline=T0 + timedelta(seconds=30),
    )


def big_result(size: int) -> Result:
    return Result(
        invocation_id="inv-1",
        status="ok",
        value={"blob": "y" * size},
        commit_status="committed",
        observed_at=T0,
    )


def fill(path, records: int = 40) -> None:
    with SQLiteLedger(path) as ledger:
        for i in range(records):
            ledger.claim(intent(LedgerKey("s", "v1", f"k{i}"), size=1000), now=T0)


def open_and_read(path) -> None:
    with SQLiteLedger(path) as ledger:
        ledger.get(KEY)


# -- SQLite: files that are not (or no longer) a ledger ---------------------------------


@pytest.mark.parametrize("where", ["header", "pages"])
def test_garbage_over_a_ledger_file_is_corrupt_store_and_left_as_found(tmp_path, where):
    """Random bytes over the header or the data pages → corrupt_store; the file is not rewritten."""
    path = tmp_path / "ledger.db"
    fill(path)
    data = bytearray(path.read_bytes())
    start = 0 if where == "header" else 4096  # page 1 holds the header and the schema
    data[start : start + 16384] = os.urandom(16384)
    path.write_bytes(bytes(data))

    with pytest.raises(LedgerError) as err:
        open_and_read(path)

    assert err.value.code == "corrupt_store"
    assert path.read_bytes() == bytes(data)


def test_a_file_that_is_not_sqlite_is_corrupt_store_and_left_as_found(tmp_path):
    """A text file given as the ledger path is refused with corrupt_store and left intact."""
    path = tmp_path / "notes.txt"
    text = b"these are my notes, not a database\n" * 200
    path.write_bytes(text)

    with pytest.raises(LedgerError, match="not a SQLite database") as err:
        SQLiteLedger(path)

    assert err.value.code == "corrupt_store"
    assert path.read_bytes() == text


def test_another_applications_database_is_refused_untouched(tmp_path):
    """A SQLite file with unrelated tables is not turned into a ledger (no tables, no WAL)."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Mira')")
    conn.close()
    before = path.read_bytes()

    with pytest.raises(LedgerError, match="another application") as err:
        SQLiteLedger(path)

    assert err.value.code == "corrupt_store"
    assert path.read_bytes() == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def test_adopting_an_application_database_keeps_its_tables(tmp_path):
    """adopt=True adds the ledger beside existing tables, which stay as they were."""
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('Mira')")
    conn.close()

    with SQLiteLedger(path, adopt=True) as ledger:
        assert ledger.claim(intent(), now=T0) == Claimed()
        with ledger.atomic() as tx:
            assert tx.connection.execute("SELECT name FROM customers").fetchall() == [("Mira",)]
    with SQLiteLedger(path) as again:  # once adopted it is a ledger: no flag needed
        assert again.get(KEY).phase == "intent"


def test_a_newer_schema_version_is_unsupported_and_left_as_found(tmp_path):
    """A ledger written by a newer toolbound raises unsupported_schema, never reinitialised."""
    path = tmp_path / "ledger.db"
    fill(path, records=3)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO toolbound_schema_version VALUES (99, 'from the future', 'x')")
    conn.close()
    before = path.read_bytes()

    with pytest.raises(LedgerError, match="version 99") as err:
        SQLiteLedger(path)

    assert err.value.code == "unsupported_schema"
    assert path.read_bytes() == before


def version_one(conn, dialect: str) -> None:
    """Lay out the ledger as schema version 1 (before epochs), as an older release left it."""
    for statement in MIGRATIONS[0].statements(dialect):  # type: ignore[arg-type]
        conn.execute(statement)
    conn.execute(
        "INSERT INTO toolbound_schema_version VALUES (1, 'v1', '2026-01-01T00:00:00+00:00')"
    )


def test_a_version_one_ledger_is_migrated_and_its_records_are_the_first_epoch(tmp_path):
    """Opening a v1 file adds the epoch column: old records are epoch 1, and fence as such."""
    path = tmp_path / "ledger.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE toolbound_schema_version (version INTEGER PRIMARY KEY,"
            " description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        version_one(conn, "sqlite")
        conn.execute(
            "INSERT INTO toolbound_ledger (scope, tool_version, key, digest, invocation_id,"
            " tool, canonical, subject, phase, deadline_us, created_us, updated_us)"
            " VALUES ('acme/mira', 'v1', 'key-1', 'digest-a', 'inv-1', 'orders.create@v1',"
            " x'7b7d', '{}', 'executing', 0, 0, 0)"
        )
    conn.close()
    with SQLiteLedger(path) as ledger:
        assert ledger.get(KEY).epoch == 1
        with pytest.raises(LedgerError) as err:
            ledger.advance(KEY, invocation_id="inv-1", phase="committed", now=T0, epoch=2)
        assert err.value.code == "fenced"
    with sqlite3.connect(path) as conn:
        versions = [v for (v,) in conn.execute("SELECT version FROM toolbound_schema_version")]
    conn.close()
    assert versions == [1, SCHEMA_VERSION] == [1, 2]


def test_a_ledger_table_without_a_version_table_is_corrupt_store(tmp_path):
    """A toolbound_ledger table with no version table is not trusted as a ledger."""
    path = tmp_path / "odd.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE toolbound_ledger (anything TEXT)")
    conn.close()
    with pytest.raises(LedgerError, match="no toolbound_schema_version") as err:
        SQLiteLedger(path)
    assert err.value.code == "corrupt_store"


# -- SQLite: a full database -----------------------------------------------------------


def test_a_full_database_fails_the_claim_loudly_and_loses_nothing(tmp_path):
    """SQLITE_FULL → storage_full; the failed claim left no intent; every Claimed one survives."""
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    conn = ledger._connection()
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages + 6}")  # a real SQLITE_FULL, a few pages on

    acknowledged: list[LedgerKey] = []
    refused: tuple[LedgerKey, LedgerError] | None = None
    for i in range(500):
        key = LedgerKey("s", "v1", f"k{i}")
        try:
            assert ledger.claim(intent(key, size=1500), now=T0) == Claimed()
        except LedgerError as exc:
            refused = (key, exc)
            break
        acknowledged.append(key)

    assert refused is not None, "the database never filled up"
    key, error = refused
    assert (error.code, error.recoverable) == ("storage_full", True)
    assert acknowledged, "nothing fitted before the database was full"
    assert ledger.get(key) is None  # not Claimed, and no intent written
    assert all(ledger.get(k).phase == "intent" for k in acknowledged)

    with pytest.raises(LedgerError) as err:  # a result that does not fit either
        ledger.advance(
            acknowledged[0],
            invocation_id="inv-1",
            phase="executing",
            now=T0,
            evidence={"blob": "z" * 50_000},
        )
    assert err.value.code == "storage_full"
    assert ledger.get(acknowledged[0]).evidence == ()
    assert ledger.get(acknowledged[0]).phase == "intent"
    ledger.close()

    with SQLiteLedger(path) as reopened:  # room again: nothing acknowledged was lost
        assert all(reopened.get(k).phase == "intent" for k in acknowledged)
        assert reopened.get(key) is None
        assert reopened.claim(intent(key), now=T0) == Claimed()


def test_a_write_lock_held_past_busy_timeout_is_storage_unavailable(tmp_path):
    """Another writer holding the lock past busy_timeout → recoverable storage_unavailable."""
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path, busy_timeout=0.1)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(LedgerError, match="locked") as err:
            ledger.claim(intent(), now=T0)
        assert (err.value.code, err.value.recoverable) == ("storage_unavailable", True)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert ledger.get(KEY) is None
    assert ledger.claim(intent(), now=T0) == Claimed()
    ledger.close()


def test_a_closed_ledger_is_storage_unavailable(tmp_path):
    """Calls after close() raise storage_unavailable instead of reopening silently."""
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    ledger.close()
    with pytest.raises(LedgerError) as err:
        ledger.get(KEY)
    assert err.value.code == "storage_unavailable"


def test_threads_that_end_give_their_connections_back(tmp_path):
    """A connection per thread, closed once the thread is gone (no leak under thread churn)."""
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        for _ in range(5):
            t = threading.Thread(target=ledger.get, args=(KEY,))
            t.start()
            t.join()
        ledger.get(KEY)
        assert len(ledger._connections) <= 2


def test_a_forked_child_opens_its_own_connections(tmp_path):
    """After fork() the store never reuses the parent's connection; it opens its own."""
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        assert ledger.claim(intent(), now=T0) == Claimed()
        parents = ledger._connection()
        ledger._pid = -1  # what the child sees: os.getpid() no longer matches
        assert ledger._connection() is not parents
        assert ledger.get(KEY).phase == "intent"
        parents.close()  # in a real child the parent still owns it


def test_naive_instants_are_refused_by_the_sql_store(tmp_path):
    """A naive datetime is a caller bug: refused, not guessed at (local time? UTC?)."""
    with SQLiteLedger(tmp_path / "ledger.db") as ledger:
        with pytest.raises(ConfigurationError, match="timezone-aware"):
            ledger.claim(intent(), now=datetime(2026, 7, 19, 6, 0))  # noqa: DTZ001
        assert ledger.get(KEY) is None


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"synchronous": "OFF"}, "never OFF"),
        ({"expired": "guess"}, "explicit policy"),
        ({"retention": timedelta(0)}, "positive"),
    ],
)
def test_unsafe_settings_are_refused(tmp_path, settings, match):
    """synchronous=OFF, an unknown expiry policy or no retention are configuration errors."""
    with pytest.raises(ConfigurationError, match=match):
        SQLiteLedger(tmp_path / "ledger.db", **settings)


# -- PostgreSQL: schema and lost connections --------------------------------------------

LEDGER_SESSIONS = """
    SELECT pid FROM pg_stat_activity
    WHERE application_name = 'toolbound-ledger' AND pid <> pg_backend_pid()
"""


@pytest.fixture
def pg_ledger(pg_conninfo):
    from toolbound.ledger.postgres import PostgresLedger

    ledger = PostgresLedger(pg_conninfo, pool_size=2)
    yield ledger
    ledger.close()


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def terminate(pg_admin, pids: list[int]) -> None:
    for pid in pids:
        pg_admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_until(
        lambda: (
            not pg_admin.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)
            ).fetchall()
        )
    )


def test_postgres_newer_schema_version_is_unsupported(pg_conninfo, pg_ledger):
    """A PostgreSQL ledger at a newer schema version is refused with unsupported_schema."""
    import psycopg

    from toolbound.ledger.postgres import PostgresLedger

    pg_ledger.claim(intent(), now=T0)
    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute("INSERT INTO toolbound_schema_version VALUES (99, 'future', now())")
    with pytest.raises(LedgerError, match="version 99") as err:
        PostgresLedger(pg_conninfo)
    assert err.value.code == "unsupported_schema"
    assert pg_ledger.get(KEY).phase == "intent"  # nothing was reset


def test_postgres_version_one_ledger_is_migrated_to_epochs(pg_conninfo):
    """A v1 PostgreSQL ledger gains the epoch column on open; its records are epoch 1."""
    import psycopg

    from toolbound.ledger.postgres import PostgresLedger

    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE toolbound_schema_version (version integer PRIMARY KEY,"
            " description text NOT NULL, applied_at timestamptz NOT NULL)"
        )
        version_one(conn, "postgres")
        conn.execute(
            "INSERT INTO toolbound_ledger (scope, tool_version, key, digest, invocation_id,"
            " tool, canonical, subject, phase, deadline, created_at, updated_at)"
            " VALUES ('acme/mira', 'v1', 'key-1', 'digest-a', 'inv-1', 'orders.create@v1',"
            " '\\x7b7d', '{}', 'executing', now(), now(), now())"
        )
    with PostgresLedger(pg_conninfo) as ledger:
        assert ledger.get(KEY).epoch == 1
        assert ledger.claim(intent(invocation_id="inv-2"), now=T0).kind == "in_flight"


def test_postgres_foreign_ledger_table_is_corrupt_store(pg_conninfo):
    """A toolbound_ledger table with no version table is refused, not adopted or dropped."""
    import psycopg

    from toolbound.ledger.postgres import PostgresLedger

    with psycopg.connect(pg_conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE toolbound_ledger (anything text)")
        conn.execute("INSERT INTO toolbound_ledger VALUES ('keep me')")
    with pytest.raises(LedgerError, match="no toolbound_schema_version") as err:
        PostgresLedger(pg_conninfo)
    assert err.value.code == "corrupt_store"
    with psycopg.connect(pg_conninfo) as conn:
        assert conn.execute("SELECT anything FROM toolbound_ledger").fetchall() == [("keep me",)]


def test_postgres_unreachable_server_is_storage_unavailable(pg_cluster):
    """No server listening → storage_unavailable at open, within the timeout."""
    import socket

    from toolbound.ledger.postgres import PostgresLedger

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(LedgerError) as err:
        PostgresLedger(f"host=127.0.0.1 port={port} user=postgres dbname=x", timeout=0.5)
    assert err.value.code == "storage_unavailable"
    assert time.monotonic() - started < 5


def test_postgres_idle_connection_dropped_between_claim_and_advance_is_replaced(
    pg_ledger, pg_admin
):
    """A pooled connection the server dropped while idle is replaced: the advance succeeds."""
    assert pg_ledger.claim(intent(), now=T0) == Claimed()
    terminate(pg_admin, [r[0] for r in pg_admin.execute(LEDGER_SESSIONS)])

    pg_ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)

    assert pg_ledger.get(KEY).phase == "executing"


@pytest.fixture
def round_trips(monkeypatch) -> list[object]:
    """The connections the pool checked with a round trip (the real check still runs)."""
    from psycopg_pool import ConnectionPool

    checked: list[object] = []
    real = ConnectionPool.check_connection

    def check(conn) -> None:
        checked.append(conn)
        real(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(check))
    return checked


def test_postgres_a_connection_back_moments_ago_is_reused_without_a_round_trip(
    pg_ledger, round_trips
):
    """Nothing on its socket, back within FRESH: claim and advance are one round trip each."""
    assert pg_ledger.get(KEY) is None  # the pool's first connection, checked once
    round_trips.clear()
    assert pg_ledger.claim(intent(), now=T0) == Claimed()
    pg_ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)
    assert round_trips == []
    assert pg_ledger.get(KEY).phase == "executing"


def test_postgres_a_connection_idle_past_fresh_is_checked_with_a_round_trip(
    pg_ledger, round_trips, monkeypatch
):
    """Idle longer than FRESH: the empty query goes to the server first."""
    from toolbound.ledger import postgres

    monkeypatch.setattr(postgres, "FRESH", 0.0)
    assert pg_ledger.claim(intent(), now=T0) == Claimed()
    pg_ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)
    assert len(round_trips) == 2


def test_postgres_a_connection_the_server_wrote_to_is_checked_with_a_round_trip(
    pg_ledger, pg_admin, round_trips
):
    """Something arrived on the idle connection's socket: it is checked before use."""
    with pg_ledger.atomic() as tx:
        tx.connection.execute("LISTEN toolbound_test")
        listening = tx.connection
    round_trips.clear()
    pg_admin.execute("NOTIFY toolbound_test")
    wait_until(lambda: postgres_readable(listening))
    assert pg_ledger.claim(intent(), now=T0) == Claimed()
    assert round_trips == [listening]


def postgres_readable(conn) -> bool:
    from toolbound._pgcheck import readable as _readable

    return _readable(conn.pgconn.socket)


def test_postgres_unchecked_dropped_connection_fails_one_call_then_recovers(pg_conninfo, pg_admin):
    """Without the pool check: that call is storage_unavailable; the next works; record intact."""
    from toolbound.ledger.postgres import PostgresLedger

    with PostgresLedger(pg_conninfo, pool_size=1, check_connections=False) as ledger:
        assert ledger.claim(intent(), now=T0) == Claimed()
        terminate(pg_admin, [r[0] for r in pg_admin.execute(LEDGER_SESSIONS)])

        with pytest.raises(LedgerError) as err:
            ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)

        assert (err.value.code, err.value.recoverable) == ("storage_unavailable", True)
        assert ledger.get(KEY).phase == "intent"  # the pool recovered; the claim is intact
        ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)
        assert ledger.get(KEY).phase == "executing"


def test_postgres_connection_lost_mid_advance_is_storage_unavailable(
    pg_conninfo, pg_ledger, pg_admin
):
    """Backend killed during an advance → storage_unavailable; record intact; pool recovers."""
    import psycopg

    assert pg_ledger.claim(intent(), now=T0) == Claimed()
    with psycopg.connect(pg_conninfo) as locker, ThreadPoolExecutor(1) as pool:
        locker.execute("SELECT 1 FROM toolbound_ledger FOR UPDATE")  # holds the row
        advance = pool.submit(
            pg_ledger.advance, KEY, invocation_id="inv-1", phase="executing", now=T0
        )
        waiting: list[int] = []

        def blocked() -> bool:
            waiting[:] = [
                r[0] for r in pg_admin.execute(LEDGER_SESSIONS + " AND wait_event_type = 'Lock'")
            ]
            return bool(waiting)

        wait_until(blocked)
        terminate(pg_admin, waiting)  # the advance's connection dies mid-statement
        with pytest.raises(LedgerError) as err:
            advance.result(timeout=10)
        locker.rollback()

    assert (err.value.code, err.value.recoverable) == ("storage_unavailable", True)
    assert pg_ledger.get(KEY).phase == "intent"  # intact: the refused advance wrote nothing
    pg_ledger.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)  # pool recovered
    assert pg_ledger.get(KEY).phase == "executing"


def test_postgres_connection_lost_inside_atomic_commits_nothing(pg_ledger, pg_admin):
    """Backend killed inside atomic(): storage_unavailable, no record, no business row."""
    with pg_ledger.atomic() as tx:
        tx.connection.execute("CREATE TABLE orders (id text)")

    def execute_and_lose_the_connection() -> None:
        with pg_ledger.atomic() as tx:
            assert tx.claim(intent(), now=T0) == Claimed()
            tx.connection.execute("INSERT INTO orders VALUES ('o-1')")
            terminate(pg_admin, [tx.connection.info.backend_pid])
            tx.advance(KEY, invocation_id="inv-1", phase="executing", now=T0)

    with pytest.raises(LedgerError) as err:
        execute_and_lose_the_connection()

    assert err.value.code == "storage_unavailable"
    assert pg_ledger.get(KEY) is None  # no call reported recorded that was not
    with pg_ledger.atomic() as tx:
        assert tx.connection.execute("SELECT count(*) FROM orders").fetchone() == (0,)
    assert pg_ledger.claim(intent(), now=T0) == Claimed()


def _refusing_port() -> int:
    """A loopback port nothing listens on: connecting is refused at once."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_server_that_refuses_is_found_at_once_and_tried_again_after_a_pause():
    """No caller waits out the pool's timeout for a server that refused; none retries at once."""
    from psycopg_pool import ConnectionPool, PoolTimeout

    from toolbound._pgcheck import RETRY, Outage

    outage = Outage()
    conninfo = f"host=127.0.0.1 port={_refusing_port()} dbname=x connect_timeout=2"
    pool = ConnectionPool(
        conninfo,
        min_size=0,
        max_size=2,
        open=False,
        reconnect_timeout=0,
        reconnect_failed=outage.connect_failed,
    )
    pool.open(wait=False)
    try:

        def attempts() -> int:
            return int(pool.get_stats().get("connections_errors", 0))

        start = time.monotonic()
        with pytest.raises(PoolTimeout, match="refused"):
            outage.getconn(pool, timeout=10)
        assert time.monotonic() - start < 1.0  # not the 10 s the caller would wait
        tried = attempts()
        assert tried >= 1
        start = time.monotonic()
        with pytest.raises(PoolTimeout, match="refused a connection"):
            outage.getconn(pool, timeout=10)
        assert time.monotonic() - start < 0.05
        assert attempts() == tried  # refused moments ago: not tried again
        time.sleep(RETRY)
        with pytest.raises(PoolTimeout):
            outage.getconn(pool, timeout=10)
        assert attempts() > tried  # after the pause, tried again
    finally:
        pool.close()
