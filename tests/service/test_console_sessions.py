"""R18: console sessions live in the journal, so every replica sharing the store agrees on them.

The same checks run against the SQLite journal and a real PostgreSQL one.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from toolbound.journal import PostgresJournal, SQLiteJournal

NOW = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=8)


@pytest.fixture(params=["sqlite", "postgres"])
def journal(request, tmp_path):
    if request.param == "sqlite":
        opened = SQLiteJournal(tmp_path / "journal.db")
    else:
        opened = PostgresJournal(request.getfixturevalue("pg_conninfo"))
    yield opened
    opened.close()


def test_a_session_lives_until_it_expires(journal):
    """An open session names its principal until expires_at, and not from then on."""
    journal.open_session("sid-1", "ana", now=NOW, expires_at=LATER)
    assert journal.session_principal("sid-1", now=NOW) == "ana"
    assert journal.session_principal("sid-1", now=LATER - timedelta(seconds=1)) == "ana"
    assert journal.session_principal("sid-1", now=LATER) is None
    assert journal.session_principal("another", now=NOW) is None


def test_ending_a_session_ends_only_that_one(journal):
    """end_session (log out) ends one session; the principal's other sessions go on."""
    journal.open_session("sid-1", "ana", now=NOW, expires_at=LATER)
    journal.open_session("sid-2", "ana", now=NOW, expires_at=LATER)
    journal.end_session("sid-1")
    assert journal.session_principal("sid-1", now=NOW) is None
    assert journal.session_principal("sid-2", now=NOW) == "ana"


def test_revoking_a_principal_ends_all_its_sessions(journal):
    """end_sessions(principal) ends every session of it and says how many; others stay."""
    for sid, who in (("a1", "ana"), ("a2", "ana"), ("o1", "ops")):
        journal.open_session(sid, who, now=NOW, expires_at=LATER)
    assert journal.end_sessions("ana") == 2
    assert journal.session_principal("a1", now=NOW) is None
    assert journal.session_principal("a2", now=NOW) is None
    assert journal.session_principal("o1", now=NOW) == "ops"


def test_the_store_keeps_no_usable_session_id(journal, tmp_path):
    """Only a hash of each session id is stored: reading the table gives no one a session."""
    journal.open_session("secret-session-id", "ana", now=NOW, expires_at=LATER)
    if isinstance(journal, SQLiteJournal):
        raw = (tmp_path / "journal.db").read_bytes() + (tmp_path / "journal.db-wal").read_bytes()
        assert b"secret-session-id" not in raw


def test_expired_sessions_are_removed_as_new_ones_open(journal):
    """Opening a session deletes the expired ones, so the table does not grow without end."""
    journal.open_session("old", "ana", now=NOW, expires_at=LATER)
    journal.open_session("new", "ana", now=LATER, expires_at=LATER + timedelta(hours=8))
    assert journal.end_sessions("ana") == 1
