"""Threads and processes racing one key on one SQLite file and one PostgreSQL database.

R8 under contention: exactly one racer executes; every other gets in-flight or the
stored result; a racer with other arguments gets key reuse. Side effects are counted in
a real table in the same database, not with a mock.
"""

from __future__ import annotations

import contextlib
import fcntl
import multiprocessing
import os
import select
import signal
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from script_process import script_process
from toolbound._model import Result
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import Claimed, Intent, Ledger, LedgerError, LedgerKey, Replay

THREADS = 8
PROCESSES = 4
T0 = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
KEY = LedgerKey("acme/mira", "v1", "order-42")
INSERT = {
    "sqlite": "INSERT INTO side_effects (racer) VALUES (?)",
    "sqlite-normal": "INSERT INTO side_effects (racer) VALUES (?)",
    "postgres": "INSERT INTO side_effects (racer) VALUES (%s)",
}


def intent(racer: str, digest: str = "digest-a") -> Intent:
    return Intent(
        key=KEY,
        digest=digest,
        invocation_id=racer,
        tool="orders.create@v1",
        canonical=b'{"item":"tea","qty":1}',
        subject={"id": "mira", "tenant": "acme", "session": "s-1"},
        deadline=T0 + timedelta(seconds=30),
    )


def outcome(racer: str) -> Result:
    return Result(
        invocation_id=racer,
        status="ok",
        value={"order": "o-42", "by": racer},
        commit_status="committed",
        observed_at=T0,
    )


def open_store(kind: str, target: str, pool_size: int = 2) -> Ledger:
    if kind == "sqlite":
        return SQLiteLedger(target)
    if kind == "sqlite-normal":  # no in-process writer queue at NORMAL: SQLite's lock alone
        return SQLiteLedger(target, synchronous="NORMAL")
    from toolbound.ledger.postgres import PostgresLedger

    return PostgresLedger(target, pool_size=pool_size)


def execute(tx, kind: str, racer: str) -> None:
    """The winner's work: the side effect and its records in one transaction (R8)."""
    tx.advance(KEY, invocation_id=racer, phase="executing", now=T0)
    tx.connection.execute(INSERT[kind], (racer,))  # the side effect, counted below
    tx.advance(KEY, invocation_id=racer, phase="committed", now=T0, result=outcome(racer))


def race(ledger: Ledger, kind: str, mode: str, racer: str, barrier) -> str:
    """One racer: claim at the barrier; the winner executes.

    ``claim-first``: the intent commits on its own, then the effect and the records
    commit together. ``one-transaction``: the claim is inside that transaction too.
    """
    barrier.wait(timeout=60)
    if mode == "claim-first":
        answer = ledger.claim(intent(racer), now=T0)
        if isinstance(answer, Claimed):
            time.sleep(0.05)  # hold the key a moment, so others find it in flight
            with ledger.atomic() as tx:
                execute(tx, kind, racer)
        return answer.kind
    with ledger.atomic() as tx:
        answer = tx.claim(intent(racer), now=T0)
        if isinstance(answer, Claimed):
            time.sleep(0.05)  # others wait on the key's lock meanwhile
            execute(tx, kind, racer)
    return answer.kind


def process_racer(racer: str, barrier, answers, *, kind: str, mode: str, target: str) -> None:
    """A racer in its own process, with its own store on the same file / database."""
    try:
        ledger = open_store(kind, target)
        try:
            answers.put((racer, race(ledger, kind, mode, racer, barrier)))
        finally:
            ledger.close()
    except BaseException as exc:
        answers.put((racer, f"error: {exc!r}"))  # the parent aborts the barrier and says why
        raise


def other_arguments_racer(ledger: Ledger, barrier) -> str:
    """Claims the key with a different digest once someone holds it."""
    deadline = time.monotonic() + 60
    while ledger.get(KEY) is None and not barrier.broken and time.monotonic() < deadline:
        time.sleep(0.001)
    return ledger.claim(intent("thread-odd", digest="digest-b"), now=T0).kind


@pytest.fixture(params=["sqlite", "sqlite-normal", "postgres"])
def arena(request, tmp_path):
    """A store with a real side-effects table, and what another process needs to open it."""
    kind = request.param
    target = (
        request.getfixturevalue("pg_conninfo") if kind == "postgres" else str(tmp_path / "race.db")
    )
    ledger = open_store(kind, target, pool_size=THREADS)
    with ledger.atomic() as tx:
        tx.connection.execute("CREATE TABLE side_effects (racer TEXT NOT NULL)")
    yield kind, target, ledger
    ledger.close()


@pytest.mark.parametrize("mode", ["claim-first", "one-transaction"])
def test_racers_on_one_key_execute_exactly_once(arena, mode):
    """8 threads and 4 processes race one key: one executes, the rest see in-flight or replay."""
    kind, target, ledger = arena
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(THREADS + PROCESSES)
    answers = ctx.Queue()
    processes = [
        ctx.Process(
            target=process_racer,
            args=(f"proc-{i}", barrier, answers),
            kwargs={"kind": kind, "mode": mode, "target": target},
        )
        for i in range(PROCESSES)
    ]
    for p in processes:
        p.start()
    try:
        with ThreadPoolExecutor(THREADS + 1) as pool:
            odd = pool.submit(other_arguments_racer, ledger, barrier)
            threads = {
                f"thread-{i}": pool.submit(race, ledger, kind, mode, f"thread-{i}", barrier)
                for i in range(THREADS)
            }
            got: dict[str, str] = {}
            for _ in processes:
                racer, answer = answers.get(timeout=90)
                if answer.startswith("error"):
                    barrier.abort()  # release every other racer instead of timing out
                    pytest.fail(f"racer {racer} failed: {answer}")
                got[racer] = answer
            got.update((racer, f.result(timeout=90)) for racer, f in threads.items())
            odd_answer = odd.result(timeout=90)
    finally:
        for p in processes:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in processes] == [0] * PROCESSES

    winners = [racer for racer, kind_ in got.items() if kind_ == "claimed"]
    assert len(winners) == 1, got
    (winner,) = winners
    # In one transaction nobody can see the key before it commits: they wait, then replay.
    seen = {"replay"} if mode == "one-transaction" else {"in_flight", "replay"}
    assert {k for r, k in got.items() if r != winner} <= seen, got
    assert odd_answer == "key_reused"
    with ledger.atomic() as tx:
        rows = tx.connection.execute("SELECT racer FROM side_effects").fetchall()
    assert [tuple(r) for r in rows] == [(winner,)]  # exactly one side effect
    record = ledger.get(KEY)
    assert (record.invocation_id, record.phase) == (winner, "committed")
    late = ledger.claim(intent("late"), now=T0 + timedelta(seconds=1))
    assert late == Replay(invocation_id=winner, result=outcome(winner))


# -- group commit (SQLite at FULL) -------------------------------------------------------


def _other_key(n: int) -> Intent:
    base = intent(f"writer-{n}")
    return Intent(
        key=LedgerKey("acme/mira", "v1", f"order-{n}"),
        digest=base.digest,
        invocation_id=base.invocation_id,
        tool=base.tool,
        canonical=base.canonical,
        subject=base.subject,
        deadline=base.deadline,
    )


def _queue_behind_a_held_lock(ledger: SQLiteLedger, writes, count: int) -> list[object]:
    """Start ``count`` writes while this thread holds the write lock, then release it.

    Released once all are queued, so they commit as one group. Returns each write's
    value, or the exception it raised.
    """

    def attempt(n: int) -> object:
        try:
            return writes(n)
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            return exc

    with ThreadPoolExecutor(count) as pool:
        with ledger.atomic():
            futures = [pool.submit(attempt, n) for n in range(count)]
            while len(ledger._queued) < count:  # waiting for the group to form
                time.sleep(0.001)
        # Leaving atomic() released the lock: one of them commits all of them.
        return [f.result() for f in futures]


def test_queued_writes_commit_together_and_each_gets_its_answer(tmp_path):
    """Writes queued behind one commit go to disk as one group; each caller gets its own answer."""
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    answers = _queue_behind_a_held_lock(
        ledger, lambda n: ledger.claim_executing(_other_key(n), now=T0), THREADS
    )
    assert answers == [Claimed()] * THREADS
    reopened = SQLiteLedger(tmp_path / "ledger.db")
    assert {reopened.get(_other_key(n).key).phase for n in range(THREADS)} == {"executing"}
    reopened.close()
    ledger.close()


def test_a_refused_write_in_a_group_fails_alone(tmp_path):
    """One write of a group refused (an illegal edge): it raises; the others are recorded."""
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    for n in range(THREADS):
        assert ledger.claim_executing(_other_key(n), now=T0) == Claimed()

    def advance(n: int) -> None:
        # writer-0 asks for an edge the table refuses: executing -> intent.
        ledger.advance(
            _other_key(n).key,
            invocation_id=f"writer-{n}",
            phase="intent" if n == 0 else "committed",
            now=T0,
            result=None if n == 0 else outcome(f"writer-{n}"),
        )

    answers = _queue_behind_a_held_lock(ledger, advance, THREADS)
    assert isinstance(answers[0], LedgerError)
    assert answers[0].code == "illegal_phase"
    assert answers[1:] == [None] * (THREADS - 1)
    assert ledger.get(_other_key(0).key).phase == "executing"
    assert {ledger.get(_other_key(n).key).phase for n in range(1, THREADS)} == {"committed"}
    ledger.close()


# -- processes take turns on one SQLite file ---------------------------------------------

_OTHER_PROCESS = """
import sys, time
from toolbound.ledger.sqlite import SQLiteLedger
ledger = SQLiteLedger(sys.argv[1], synchronous=sys.argv[2])
if sys.argv[3] == "hold":
    with ledger.atomic() as tx:
        tx.connection.execute("SELECT 1")
        print("held", flush=True)
        sys.stdin.readline()
    print("committed", flush=True)
else:
    print("ready", flush=True)
    sys.stdin.readline()
    with ledger.atomic():
        pass
    print(time.monotonic(), flush=True)
ledger.close()
"""


@contextlib.contextmanager
def _other_process(path, synchronous: str, role: str):
    """Another process on the same ledger file: ``hold`` a write transaction, or ``write``.

    ``hold`` keeps its write transaction open until told to commit; ``write`` writes
    when told and prints when it was done (``time.monotonic``, one clock for all).
    """
    first = "held" if role == "hold" else "ready"
    with script_process(_OTHER_PROCESS, str(path), synchronous, role, first=first) as process:
        yield process


def _tell(process, line: str) -> str:
    process.stdin.write(line + "\n")
    process.stdin.flush()
    return process.stdout.readline().strip()


def _turn_is_free(path) -> bool:
    """Whether the file's ``-turns`` lock can be had now (an open file of its own)."""
    fd = os.open(f"{path}-turns", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    finally:
        os.close(fd)


@pytest.mark.parametrize("synchronous", ["FULL", "NORMAL"])
def test_a_writer_of_another_process_is_waited_for_in_turn(tmp_path, synchronous):
    """Another process's open write transaction: a claim here runs soon after it commits.

    The processes take turns on the file's ``-turns`` lock, tried again every fraction
    of a millisecond, instead of SQLite's busy handler, whose naps grow to 100 ms.
    """
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path, synchronous=synchronous)
    done: list[float] = []

    def claim() -> None:
        assert ledger.claim(intent("here"), now=T0) == Claimed()
        done.append(time.monotonic())

    try:
        with _other_process(path, synchronous, "hold") as other:
            writer = threading.Thread(target=claim)
            writer.start()
            writer.join(0.3)
            assert done == []  # waiting for the other process's transaction
            assert _tell(other, "commit") == "committed"
            committed = time.monotonic()
            writer.join(10)
        assert len(done) == 1
        assert done[0] - committed < 0.02  # SQLite's busy handler naps up to 100 ms
        assert ledger.get(KEY).invocation_id == "here"
    finally:
        ledger.close()


def test_another_process_holding_its_turn_past_the_busy_timeout_is_storage_unavailable(tmp_path):
    """The turn is waited for at most ``busy_timeout``: then a store that cannot answer now."""
    path = tmp_path / "ledger.db"
    SQLiteLedger(path).close()
    ledger = SQLiteLedger(path, busy_timeout=0.2)
    try:
        with _other_process(path, "FULL", "hold"):
            started = time.monotonic()
            with pytest.raises(LedgerError, match="locked") as refused:
                ledger.claim(intent("here"), now=T0)
            assert (refused.value.code, refused.value.recoverable) == ("storage_unavailable", True)
            assert time.monotonic() - started < 2
            assert ledger.get(KEY) is None  # nothing written
        assert ledger.claim(intent("here"), now=T0) == Claimed()  # its turn ended with it
    finally:
        ledger.close()


def test_a_nested_atomic_keeps_the_turn_until_the_outer_commit(tmp_path):
    """Ledger calls and a nested ``atomic()`` inside a transaction never give the turn early.

    Another process asked to write meanwhile waits for the outer ``COMMIT``, then
    writes at once.
    """
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    try:
        with _other_process(path, "FULL", "write") as other:
            with ledger.atomic() as tx:
                assert tx.claim(intent("here"), now=T0) == Claimed()
                with ledger.atomic() as inner:
                    inner.advance(KEY, invocation_id="here", phase="executing", now=T0)
                    assert ledger.claim(_other_key(1), now=T0) == Claimed()
                ledger.advance(
                    KEY, invocation_id="here", phase="committed", now=T0, result=outcome("here")
                )
                ledger.sweep(now=T0, grace=timedelta(0))
                other.stdin.write("write\n")
                other.stdin.flush()
                waiting, _, _ = select.select([other.stdout], [], [], 0.3)
                assert waiting == []  # the other process has not written
                assert not _turn_is_free(path)
            committed = time.monotonic()
            wrote = float(other.stdout.readline())
        assert 0 < wrote - committed < 0.02
        assert ledger.get(KEY).phase == "committed"
        assert ledger.get(_other_key(1).key).phase == "intent"
        assert _turn_is_free(path)
    finally:
        ledger.close()


def _exit_status(pid: int, *, within: float) -> int | None:
    """The child's exit code, or None (and the child killed) if it is not done in time."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_takes_turns_of_its_own(tmp_path):
    """A child forked while the parent holds its turn does not inherit it: it waits its turn."""
    ledger = SQLiteLedger(tmp_path / "ledger.db", busy_timeout=0.2)
    # A thread inside SQLite at the fork would leave the child its mutexes, held for good.
    ledger._checkpoints.stop()
    try:
        with ledger.atomic() as tx:
            assert tx.claim(intent("parent"), now=T0) == Claimed()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
                child = os.fork()
            if child == 0:  # pragma: no cover - the child reports through its exit status
                code = 1
                try:
                    ledger.claim(_other_key(1), now=T0)
                    code = 2  # written while the parent held its turn
                except LedgerError as exc:
                    code = 0 if "another process" in str(exc) else 3
                finally:
                    os._exit(code)
            status = _exit_status(child, within=10)
        assert status == 0
        assert ledger.claim(_other_key(1), now=T0) == Claimed()
    finally:
        ledger.close()
