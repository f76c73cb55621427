"""The turns file the SQLite stores' writers of several processes take turns on.

Both the ledger and the journal hold it around each write transaction
(``toolbound._wal.Turns``); one that cannot be used fails the write as a store
that cannot answer, never as an internal error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from toolbound.journal import JournalError, SQLiteJournal
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import LedgerError

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("store", "error"),
    [(SQLiteLedger, LedgerError), (SQLiteJournal, JournalError)],
    ids=["ledger", "journal"],
)
def test_a_turns_file_that_cannot_be_used_is_storage_unavailable(
    tmp_path: Path, store: type, error: type[Exception]
) -> None:
    """A lock file the process cannot open: opening the store (it writes) is refused."""
    path = tmp_path / "store.db"
    store(path).close()
    (tmp_path / "store.db-turns").unlink()
    (tmp_path / "store.db-turns").mkdir()  # a folder where the lock file should be
    with pytest.raises(error) as refused:
        store(path)  # opening writes (migrations, the format's mark): it cannot
    assert getattr(refused.value, "code", None) == "storage_unavailable"
    assert "turns file" in str(refused.value)
