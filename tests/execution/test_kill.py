"""R9: a process killed at each phase boundary of a write, then restarted.

For every boundary the final state is truthful and the side effect — a row in a
real SQLite table — happens at most once, however the call is retried afterwards.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from crash_child import ARGUMENTS, call, registry, runtime

from toolbound import FixedClock
from toolbound.execution.reconcile import Reconciler
from toolbound.gates.normalize import canonical_json, digest
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import LedgerKey

CHILD = Path(__file__).parent / "crash_child.py"
# The runtime's default key is derived from the digest, so the test can name it.
KEY = LedgerKey(
    "acme",
    "pay@v1",
    "tb:"
    + digest(
        tenant="acme",
        tool_name="pay",
        tool_version="v1",
        canonical=canonical_json(json.loads(ARGUMENTS)),
    ),
)


def rows(effects_db: Path) -> int:
    db = sqlite3.connect(effects_db)
    try:
        return db.execute("SELECT count(*) FROM payments").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()


def crash(tmp_path: Path, point: str) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    ledger_db, effects_db = tmp_path / "ledger.db", tmp_path / "effects.db"
    done = subprocess.run(  # noqa: S603 - our own child program
        [sys.executable, str(CHILD), str(ledger_db), str(effects_db), point],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return ledger_db, effects_db, done


def later(clock_now=None) -> FixedClock:
    from datetime import UTC, datetime

    return FixedClock((clock_now or datetime.now(UTC)) + timedelta(hours=1))


# point → (phase found after restart + sweep, phase after reconciliation, effects)
EXPECTED = {
    # Claimed as 'executing', killed before the tool started: the ledger cannot tell that
    # from a kill mid-tool, so the sweep says unknown and the remote side settles it.
    "after_claim": ("unknown", "failed", 0),
    "after_effect": ("unknown", "committed", 1),
    "after_commit_record": ("committed", "committed", 1),
}


@pytest.mark.parametrize("point", list(EXPECTED))
def test_kill_at_each_boundary(tmp_path, point):
    """Killed at a boundary: truthful state on restart, reconciled, effect at most once."""
    ledger_db, effects_db, done = crash(tmp_path, point)
    assert done.returncode == -signal.SIGKILL, done.stderr
    swept_phase, reconciled_phase, effect_rows = EXPECTED[point]
    assert rows(effects_db) == effect_rows

    clock = later()
    ledger = SQLiteLedger(ledger_db)
    reg = registry(str(effects_db))
    reconciler = Reconciler(ledger=ledger, registry=reg, clock=clock, grace=timedelta(seconds=5))
    reconciler.unresolved()  # sweeps what the dead process left behind
    record = ledger.get(KEY)
    assert record is not None
    assert record.phase == swept_phase

    reconciler.reconcile()
    record = ledger.find(record.invocation_id)
    assert record.phase == reconciled_phase

    # The same call proposed again after the restart: at most one effect in total.
    rt = runtime(ledger, clock)
    again = call(rt, reg)
    rt.close()
    if reconciled_phase == "committed":
        assert again.kind == "observed"
        assert again.replayed_from == record.invocation_id
    else:
        assert again.kind == "observed"
        assert again.replayed_from is None
    assert rows(effects_db) == 1
    ledger.close()


def test_unknown_without_query_hook_is_never_rerun(tmp_path):
    """Killed after the effect with no way to ask: unknown, listed, never run again."""
    ledger_db, effects_db, done = crash(tmp_path, "after_effect")
    assert done.returncode == -signal.SIGKILL
    clock = later()
    ledger = SQLiteLedger(ledger_db)
    reg = registry(str(effects_db), with_query=False)
    reconciler = Reconciler(ledger=ledger, registry=reg, clock=clock, grace=timedelta(seconds=5))
    (result,) = reconciler.reconcile()
    assert result.status == "needs_person"
    rt = runtime(ledger, clock)
    again = call(rt, reg)
    rt.close()
    assert again.problem.code == "outcome_unknown"
    assert rows(effects_db) == 1
    ledger.close()


def test_no_crash_commits_once(tmp_path):
    """The control: without a kill the call commits and a repeat replays."""
    ledger_db, effects_db, done = crash(tmp_path, "none")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "observed"
    ledger = SQLiteLedger(ledger_db)
    rt = runtime(ledger)
    again = call(rt, registry(str(effects_db)))
    rt.close()
    assert again.replayed_from is not None
    assert rows(effects_db) == 1
    ledger.close()
