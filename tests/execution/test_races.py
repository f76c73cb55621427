"""R8 under contention: threads and processes race one key through real runtimes.

Exactly one racer executes; every other gets in-progress or the stored result; a
racer with other arguments under the same key gets key-reuse rejection. The side
effects are counted in a real table, on one SQLite file and on one PostgreSQL
database.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from race_child import run

CHILD = Path(__file__).parent / "race_child.py"
THREADS, PROCESSES = 6, 4


def sqlite_target(tmp_path: Path) -> tuple[str, str]:
    effects = tmp_path / "effects.db"
    db = sqlite3.connect(effects)
    db.execute("CREATE TABLE effects (key TEXT, variant TEXT)")
    db.commit()
    db.close()
    return f"sqlite:///{tmp_path / 'ledger.db'}", str(effects)


def sqlite_rows(effects: str) -> list[tuple[str, str]]:
    db = sqlite3.connect(effects)
    try:
        return db.execute("SELECT key, variant FROM effects").fetchall()
    finally:
        db.close()


@pytest.fixture(params=["sqlite", "postgres"])
def target(request, tmp_path):
    """(ledger URL, effects target, a function listing the effect rows)."""
    if request.param == "sqlite":
        url, effects = sqlite_target(tmp_path)
        return url, effects, lambda: sqlite_rows(effects)
    conninfo = request.getfixturevalue("pg_conninfo")
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("CREATE TABLE effects (key text, variant text)")

    def rows():
        with psycopg.connect(conninfo) as conn:
            return conn.execute("SELECT key, variant FROM effects").fetchall()

    return conninfo, "pg", rows


def check(results: list[dict[str, object]], rows, *, reused: int) -> None:
    executed = [r for r in results if r["kind"] == "observed" and not r["replayed"]]
    assert len(executed) == 1, results
    others = Counter(
        "replay" if r["replayed"] else str(r["code"]) for r in results if r not in executed
    )
    assert set(others) <= {"replay", "in_progress", "key_reused"}, results
    assert others["key_reused"] == reused
    assert rows() == [("order-7", "book")]


def test_threads_race_one_key(target):
    """N threads, same call, same key: one execution, one row."""
    url, effects, rows = target
    results: list[dict[str, object]] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)  # the other racers and this thread

    def racer(variant: str) -> None:
        if variant == "book":
            start.wait()
        outcome = run(url, effects, variant)
        with lock:
            results.append(outcome)

    threads = [
        threading.Thread(target=racer, args=("book" if i else "lamp",)) for i in range(THREADS)
    ]
    # the 'lamp' racer starts late, so that 'book' holds the key when it arrives
    for t in threads[1:]:
        t.start()
    start.wait()
    time.sleep(0.05)
    threads[0].start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == THREADS
    check(results, rows, reused=1)


def test_processes_race_one_key(target):
    """M processes, same call, same key, one store: one execution, one row."""
    url, effects, rows = target
    start_at = str(time.time() + 1.5)
    procs = [
        subprocess.Popen(  # noqa: S603 - our own child program
            [sys.executable, str(CHILD), url, effects, start_at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    finished = [(p, *p.communicate(timeout=60)) for p in procs]  # every pipe drained
    for p, _, err in finished:
        assert p.returncode == 0, err
    check([json.loads(out) for _, out, _ in finished], rows, reused=0)


def test_processes_open_a_new_ledger_file_together(tmp_path):
    """Several processes creating one new SQLite ledger at once all get a working ledger."""
    path = tmp_path / "fresh.db"
    start_at = time.time() + 1.0
    code = (
        "import sys, time; from toolbound.ledger.sqlite import SQLiteLedger; "
        f"time.sleep(max(0.0, {start_at} - time.time())); "
        "SQLiteLedger(sys.argv[1]).close(); print('ok')"
    )
    procs = [
        subprocess.Popen(  # noqa: S603 - our own child program
            [sys.executable, "-c", code, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    finished = [(p, *p.communicate(timeout=60)) for p in procs]
    assert [(p.returncode, out.strip()) for p, out, _ in finished] == [(0, "ok")] * 6, [
        err for _, _, err in finished
    ]
