"""Committed write invocations per second through the whole pipeline, beside a bare insert.

One *write* is :meth:`Runtime.run` on a new proposal of a registered write tool: parse →
validate → normalize → digest → authorize → idempotency claim (recorded as executing) → the
tool → committed → output check, redaction and encoding, with the trace recorded. Every
proposal has new arguments, so every call gets a new key and really executes.

Two tools, both returning a small result:

* **no-op write** — does nothing else. The ledger records the claim (already 'executing')
  before the tool runs and 'committed' after it, each durable before the next step (R9):
  two commits per write.
* **no-op write, claim apart** — the same tool over the same store, with the claim and
  the move to 'executing' as two commits (:class:`ClaimApart`), as the runtime wrote them
  before ``Ledger.claim_executing``: the same-run "before" of that change.
* **transactional write** (``ToolSpec.transactional``) — inserts one business row through
  ``ctx.transaction``, the ledger's own connection. Claim, executing, the row and the
  committed record are one transaction (R8): one commit per write, row included.

The baseline is a bare single-row insert-and-commit into the same database with the same
durability (as in ``bench_ledger.py``). ``xN`` is the pipeline's time per write over the
baseline's (1.00 = free; the aim is 2 or less). The *CPU floor* is the same pipeline
over a ledger that keeps nothing: what Python costs with no store at all. Rounds are
interleaved (the order rotating) and medians reported: fsync latency drifts over seconds.
Beside each rate are this process's CPU per write and the machine's busy cores, which tell
waiting on commits (fsync, round trips) apart from work. On PostgreSQL and on SQLite at
``FULL``, 1, 2, 4 and 8 caller threads share one Runtime, each writing its own keys, to show
how throughput scales.

PostgreSQL runs in a throwaway cluster on loopback (``tests/pgcluster.py``), stopped on
exit, error or SIGTERM. Run: ``.venv/bin/python bench/bench_writes.py`` (``--quick`` for
a smoke run).
"""

from __future__ import annotations

import os
import queue
import signal
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from itertools import count
from pathlib import Path
from resource import RUSAGE_SELF, getrusage
from typing import TYPE_CHECKING, NoReturn, Protocol, Self, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bench_ledger import threaded_rate
from pgcluster import find_bindir, throwaway_cluster
from toolbound import (
    CallContext,
    Grant,
    GrantPolicy,
    Observed,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import Claimed, LedgerError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from types import FrameType

    from toolbound._model import JSONObject, Result
    from toolbound.execution.tool import ToolContext
    from toolbound.ledger.sqlite import Synchronous
    from toolbound.ledger.store import (
        Claim,
        ExpiredPolicy,
        Intent,
        Ledger,
        LedgerKey,
        LedgerRecord,
        LedgerTransaction,
        Phase,
    )

QUICK = "--quick" in sys.argv
ROUNDS, WINDOW, WARMUP = (1, 0.2, 5) if QUICK else (5, 0.4, 20)
THREADS = (1, 2, 4, 8)
CORES = os.cpu_count() or 1
SYNCHRONOUS: tuple[Synchronous, ...] = ("FULL", "NORMAL")

BASELINE = "bare insert-and-commit (baseline)"
NOOP = "no-op write tool (2 commits)"
SPLIT = "no-op write, claim apart (3 commits)"
TRANSACTIONAL = "transactional write tool (1 commit)"
PLACE, RECORD = "place_order", "record_order"
TOOLS = {NOOP: PLACE, SPLIT: PLACE, TRANSACTIONAL: RECORD}

INPUT = {
    "type": "object",
    "properties": {"ref": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["ref", "qty"],
    "additionalProperties": False,
}
OUTPUT = {
    "type": "object",
    "properties": {"order": {"type": "string"}, "status": {"type": "string"}},
    "required": ["order", "status"],
    "additionalProperties": False,
}
SUBJECT = Subject(id="mira", tenant="acme")
# Allowed outright: no person confirms, so every call goes straight through.
GRANT = Grant(
    subject="mira", tenant="acme", capability="orders:write", actions=frozenset({"create"})
)

SQLITE_DURABILITY = {
    "FULL": "each commit fsyncs the WAL: a recorded phase survives a power cut (the default)",
    "NORMAL": "no fsync at commit, only at checkpoints: survives a process crash,"
    " a power cut may lose the last commits",
}

_serial = count()


class _Executes(Protocol):
    """What the benchmark needs of a DB-API connection (sqlite3 or psycopg)."""

    def execute(self, sql: str, params: tuple[object, ...] = ..., /) -> _Fetches: ...


class _Fetches(Protocol):
    def fetchall(self) -> list[tuple[object, ...]]: ...


def place_order(arguments: JSONObject, _ctx: ToolContext) -> JSONObject:
    """The no-op write: only a small result."""
    return {"order": str(arguments["ref"]), "status": "placed"}


def record_order(insert_sql: str | None, arguments: JSONObject, ctx: ToolContext) -> JSONObject:
    """The transactional write: one business row on the ledger's connection (R8)."""
    if insert_sql is not None:  # None for the NullLedger, whose transaction has no connection
        conn = cast("_Executes", ctx.transaction)
        conn.execute(insert_sql, (arguments["ref"], arguments["qty"]))
    return {"order": str(arguments["ref"]), "status": "recorded"}


def spec(name: str, *, transactional: bool = False) -> ToolSpec:
    """A write tool over INPUT/OUTPUT."""
    return ToolSpec(
        name=name,
        version="v1",
        description="Place one order.",
        input_schema=INPUT,
        output_schema=OUTPUT,
        effect="reversible_write",
        capabilities=("orders:write",),
        transactional=transactional,
    )


class NullLedger:
    """A ledger that records nothing, so the CPU floor is the pipeline alone.

    (``MemoryLedger`` is not that floor: its ``atomic()`` copies every record, for
    rollback, so a transactional write there costs more the more records it holds.)
    Its methods ignore what the Ledger protocol passes them.
    """

    retention = timedelta(days=1)
    expired: ExpiredPolicy = "reject"
    connection = None  # as the transaction atomic() yields: no business connection

    def claim(self, intent: Intent, *, now: datetime) -> Claim:  # noqa: ARG002
        """Every key is free."""
        return Claimed()

    def claim_executing(self, intent: Intent, *, now: datetime) -> Claim:  # noqa: ARG002
        """Every key is free."""
        return Claimed()

    def advance(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        phase: Phase,
        now: datetime,
        result: Result | None = None,
        evidence: Mapping[str, object] | None = None,
        epoch: int | None = None,
    ) -> None:
        """Nothing to record."""

    def take_over(
        self,
        key: LedgerKey,
        *,
        invocation_id: str,
        now: datetime,  # noqa: ARG002 - nothing is kept to compare it with
        evidence: Mapping[str, object] | None = None,  # noqa: ARG002
    ) -> LedgerRecord:
        """Nothing is ever held, so nothing can be taken over."""
        msg = f"invocation {invocation_id} does not hold {key}"
        raise LedgerError(msg, code="not_holder")

    def get(self, key: LedgerKey) -> LedgerRecord | None:  # noqa: ARG002
        """Nothing kept."""
        return None

    def find(self, invocation_id: str) -> LedgerRecord | None:  # noqa: ARG002
        """Nothing kept."""
        return None

    def unresolved(self) -> list[LedgerRecord]:
        """Nothing kept."""
        return []

    def sweep(self, *, now: datetime, grace: timedelta) -> list[LedgerRecord]:  # noqa: ARG002
        """Nothing kept."""
        return []

    @contextmanager
    def atomic(self) -> Iterator[LedgerTransaction]:
        """Itself as the transaction: claim and advance, no connection."""
        yield self

    def close(self) -> None:
        """Nothing to release."""


class ClaimApart:
    """A ledger whose ``claim_executing`` is a claim, then an advance: two commits.

    How the runtime recorded a write before the claim recorded 'executing' itself; the
    rest is ``inner``'s.
    """

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner
        self.retention = inner.retention
        self.expired = inner.expired

    def claim_executing(self, intent: Intent, *, now: datetime) -> Claim:
        """Claim (one commit), then 'executing' (another)."""
        answer = self.inner.claim(intent, now=now)
        if isinstance(answer, Claimed):
            self.inner.advance(
                intent.key, invocation_id=intent.invocation_id, phase="executing", now=now
            )
        return answer

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


class Writes:
    """Runtimes over one ledger with both tools; every call a new proposal."""

    def __init__(self, ledger: Ledger, insert_sql: str | None) -> None:
        registry = Registry()
        registry.register(spec(PLACE), place_order)
        registry.register(spec(RECORD, transactional=True), partial(record_order, insert_sql))
        runtime = Runtime(policy=GrantPolicy([GRANT]), ledger=ledger)
        apart = Runtime(policy=GrantPolicy([GRANT]), ledger=cast("Ledger", ClaimApart(ledger)))
        self.runtimes = {NOOP: runtime, SPLIT: apart, TRANSACTIONAL: runtime}
        self.context = CallContext(subject=SUBJECT, tools=registry.toolset())
        self.done = dict.fromkeys(TOOLS, 0)
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        for runtime in {id(r): r for r in self.runtimes.values()}.values():
            runtime.close()

    def op(self, name: str) -> Callable[[], None]:
        """The benchmark operation for the row ``name``."""
        return partial(self.write, name)

    def write(self, name: str) -> None:
        """One new proposal through Runtime.run; it must execute and commit."""
        n = next(_serial)
        proposal = Proposal(
            name=TOOLS[name], arguments=b'{"ref": "w-%d", "qty": 1}' % n, proposal_id=f"call-{n}"
        )
        out = self.runtimes[name].run(proposal, self.context)
        if not isinstance(out, Observed) or out.replayed_from is not None:
            raise AssertionError(out)
        with self._lock:
            self.done[name] += 1

    def check(self, conn: _Executes) -> str:
        """Every call left one committed record; every transactional call one row."""

        def scalar(sql: str) -> object:
            return conn.execute(sql).fetchall()[0][0]

        records = scalar("SELECT count(*) FROM toolbound_ledger")
        committed = scalar("SELECT count(*) FROM toolbound_ledger WHERE phase = 'committed'")
        rows = scalar("SELECT count(*) FROM orders")
        calls = sum(self.done.values())
        if not records == committed == calls or rows != self.done[TRANSACTIONAL]:
            msg = f"{records} records, {committed} committed, {rows} rows after {self.done}"
            raise AssertionError(msg)
        return (
            f"  checked: {calls:,} calls → {calls:,} ledger records, all committed;"
            f" {rows:,} business rows = {self.done[TRANSACTIONAL]:,} transactional calls"
        )


@dataclass(frozen=True, slots=True)
class Rounds:
    """Per op, one figure per round: ops/s, this process's CPU per op, busy cores."""

    rates: dict[str, list[float]]
    user_us: dict[str, list[float]]
    sys_us: dict[str, list[float]]
    busy: dict[str, list[float]]

    def rate(self, name: str) -> float:
        """The median ops/s of ``name``."""
        return statistics.median(self.rates[name])

    def cpu(self, name: str) -> tuple[float, float, float]:
        """Median user and system CPU µs per op of this process, and busy cores."""
        return (
            statistics.median(self.user_us[name]),
            statistics.median(self.sys_us[name]),
            statistics.median(self.busy[name]),
        )

    def line(self, name: str) -> str:
        """ops/s, wall and CPU µs per op, busy cores, and the rounds' spread."""
        ops, rates = self.rate(name), self.rates[name]
        user, system, busy = self.cpu(name)
        return (
            f"{ops:>7,.0f} /s {1e6 / ops:>6,.0f} µs  user {user:>4,.0f} + sys {system:>3,.0f} µs"
            f"  {busy:3.1f} cores  rounds [{min(rates):,.0f}..{max(rates):,.0f}]"
        )


def machine_ticks() -> tuple[int, int]:
    """Busy and total CPU ticks of the whole machine so far (Linux; zeros elsewhere)."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0]
    except OSError:
        return 0, 0
    ticks = [int(t) for t in first.split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy


def measure(op: Callable[[], None], threads: int) -> tuple[float, float, float, float]:
    """One round: ops/s, user and system CPU µs per op (this process), busy cores."""
    use0, (busy0, total0), t0 = getrusage(RUSAGE_SELF), machine_ticks(), time.perf_counter()
    rate = threaded_rate(op, threads, WINDOW)
    use1, (busy1, total1), t1 = getrusage(RUSAGE_SELF), machine_ticks(), time.perf_counter()
    per_op = 1e6 / (rate * (t1 - t0))
    cores = (busy1 - busy0) / (total1 - total0) * CORES if total1 > total0 else float("nan")
    return (
        rate,
        (use1.ru_utime - use0.ru_utime) * per_op,
        (use1.ru_stime - use0.ru_stime) * per_op,
        cores,
    )


def compare(ops: Mapping[str, Callable[[], None]], threads: int = 1) -> Rounds:
    """Every op measured in every round; the ops interleaved, their order rotating."""
    for op in ops.values():  # warm up: statements prepared, pages and connections made
        for _ in range(WARMUP):
            op()
    names = list(ops)
    rounds = Rounds(rates={}, user_us={}, sys_us={}, busy={})
    for r in range(ROUNDS):  # round 0 in the given order, so reports keep it
        for name in names[r % len(names) :] + names[: r % len(names)]:
            figures = (rounds.rates, rounds.user_us, rounds.sys_us, rounds.busy)
            for kept, value in zip(figures, measure(ops[name], threads), strict=True):
                kept.setdefault(name, []).append(value)
    return rounds


def report(title: str, rounds: Rounds, floor: Rounds | None = None) -> None:
    """Each op's figures, its time over the baseline's, and its time beyond the floor."""
    print(title)
    base = rounds.rate(BASELINE) if BASELINE in rounds.rates else None
    for name in rounds.rates:
        ratio = "" if base is None or name == BASELINE else f"x{base / rounds.rate(name):5.2f}"
        print(f"  {name:<36} {ratio:<6} {rounds.line(name)}")
    if base is None or floor is None:
        return
    beyond = {name: 1e6 / rounds.rate(name) - 1e6 / floor.rate(name) for name in TOOLS}
    print(
        "  beyond the CPU floor (store + I/O): "
        + ", ".join(
            f"{name.split(' (')[0]} {us:+,.0f} µs = {us * base / 1e6:.1f} bare inserts"
            for name, us in beyond.items()
        )
    )


def bench_floor() -> Rounds:
    """The pipeline over a ledger that keeps nothing: Python's share, no store at all."""
    with Writes(NullLedger(), None) as writes:
        rounds = compare({name: writes.op(name) for name in TOOLS})
    report("CPU floor: a ledger that keeps nothing (no store, no I/O), 1 thread", rounds)
    return rounds


def bench_sqlite(floor: Rounds) -> None:
    """SQLite, WAL, at synchronous FULL and NORMAL: one file, one thread."""
    for synchronous in SYNCHRONOUS:
        with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
            path = Path(tmp) / "ledger.db"
            ledger = stack.enter_context(SQLiteLedger(path, synchronous=synchronous))
            with ledger.atomic() as tx:
                tx.connection.execute("CREATE TABLE orders (ref TEXT PRIMARY KEY, qty INTEGER)")
                (mode,) = tx.connection.execute("PRAGMA journal_mode").fetchone()
                (level,) = tx.connection.execute("PRAGMA synchronous").fetchone()
            bare = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            stack.callback(bare.close)
            bare.execute(f"PRAGMA synchronous = {synchronous}")
            bare.execute("CREATE TABLE bare (id INTEGER PRIMARY KEY, ref TEXT)")
            if bare.execute("PRAGMA synchronous").fetchone() != (level,):
                msg = "the baseline must run at the ledger's durability"
                raise AssertionError(msg)
            writes = stack.enter_context(Writes(ledger, "INSERT INTO orders VALUES (?, ?)"))

            def bare_insert(bare: sqlite3.Connection = bare) -> None:
                bare.execute("INSERT INTO bare (ref) VALUES ('o-42')")

            ops = {BASELINE: bare_insert} | {name: writes.op(name) for name in TOOLS}
            scaling = {1: compare(ops)}
            report(
                f"SQLite {sqlite3.sqlite_version}, journal_mode={mode}, synchronous={synchronous}"
                f" ({level}), 1 thread: {SQLITE_DURABILITY[synchronous]}",
                scaling[1],
                floor,
            )
            if synchronous == "FULL":
                # Concurrent callers, where grouping commits could share one fsync.
                for threads in THREADS[1:]:
                    scaling[threads] = compare(ops, threads)
            print(writes.check(cast("_Executes", bare)))
            if len(scaling) > 1:
                print_scaling(
                    f"SQLite synchronous={synchronous}, N caller threads sharing one Runtime and"
                    " one SQLiteLedger (the baseline: one connection, one commit per insert)",
                    scaling,
                )


def bench_postgres(floor: Rounds) -> None:
    """PostgreSQL in a throwaway cluster: 1 to 8 callers sharing one Runtime."""
    bindir = find_bindir()
    if bindir is None:
        print("PostgreSQL: SKIPPED, no PostgreSQL binaries on this machine")
        return
    import psycopg  # noqa: PLC0415 - only when a server can run

    from toolbound.ledger.postgres import PostgresLedger  # noqa: PLC0415 - needs the extra

    with throwaway_cluster(bindir, databases=("bench",)) as cluster, ExitStack() as stack:
        conninfo = cluster.conninfo("bench")
        ledger = stack.enter_context(PostgresLedger(conninfo, pool_size=max(THREADS)))
        with ledger.atomic() as tx:
            tx.connection.execute("CREATE TABLE orders (ref text PRIMARY KEY, qty integer)")
            tx.connection.execute("CREATE TABLE bare (id bigserial PRIMARY KEY, ref text)")
            version = tx.connection.info.server_version
            settings = {
                name: tx.connection.execute(f"SHOW {name}").fetchone()[0]  # type: ignore[index]
                for name in ("fsync", "synchronous_commit", "wal_sync_method")
            }
        # One autocommit connection per concurrent caller, taken and given back per
        # insert (the ledger, too, takes a pooled connection per statement).
        idle: queue.SimpleQueue[psycopg.Connection[tuple[object, ...]]] = queue.SimpleQueue()
        for _ in range(max(THREADS)):
            conn = psycopg.connect(conninfo, autocommit=True)
            stack.callback(conn.close)
            idle.put(conn)

        def bare_insert() -> None:
            conn = idle.get()
            try:
                conn.execute("INSERT INTO bare (ref) VALUES ('o-42')")
            finally:
                idle.put(conn)

        writes = stack.enter_context(Writes(ledger, "INSERT INTO orders VALUES (%s, %s)"))
        ops = {BASELINE: bare_insert} | {name: writes.op(name) for name in TOOLS}
        durability = ", ".join(f"{k}={v}" for k, v in settings.items())
        scaling: dict[int, Rounds] = {}
        for threads in THREADS:
            scaling[threads] = rounds = compare(ops, threads)
            if threads == 1:
                report(
                    f"PostgreSQL {version // 10000}.{version % 10000}, loopback, {durability}:"
                    " each commit waits for its WAL flush, 1 thread",
                    rounds,
                    floor,
                )
        with ledger.atomic() as tx:
            print(writes.check(cast("_Executes", tx.connection)))
    print_scaling(
        "PostgreSQL, N caller threads sharing one Runtime and one PostgresLedger"
        f" (pool of {max(THREADS)})",
        scaling,
    )


def print_scaling(title: str, scaling: Mapping[int, Rounds]) -> None:
    """Throughput per thread count: vs 1 thread, vs the bare insert, CPU and busy cores."""
    print(
        f"{title}, each its own keys. Per op: total ops/s, x the 1-thread rate, this process's"
        f" CPU µs per op (user + sys), cores busy machine-wide (of {CORES}); x bare = pipeline"
        " time / bare insert time"
    )
    print(
        f"  {'threads':>7}  {'bare insert':<27}"
        + "".join(f"  {name.split(' (')[0][:27]:<27} {'x bare':>6}" for name in TOOLS)
    )
    one = scaling[1]
    for threads, rounds in scaling.items():
        cells = []
        for name in (BASELINE, *TOOLS):
            user, system, busy = rounds.cpu(name)
            rate = rounds.rate(name)
            cells.append(
                f"{rate:>6,.0f} x{rate / one.rate(name):4.2f} {user + system:>4,.0f} µs {busy:.1f}c"
            )
        slower = [rounds.rate(BASELINE) / rounds.rate(name) for name in TOOLS]
        print(
            f"  {threads:>7}  {cells[0]:<27}"
            + "".join(f"  {c:<27} {x:>6.2f}" for c, x in zip(cells[1:], slower, strict=True))
        )


def _stop(signum: int, _frame: FrameType | None) -> NoReturn:
    # Unwind through every `finally`, so the throwaway cluster is stopped.
    raise SystemExit(128 + signum)


def main() -> None:
    """Measure and print."""
    signal.signal(signal.SIGTERM, _stop)
    print(
        "Committed write invocations through Runtime.run, each a new proposal (new key,"
        f" executed once). Medians of {ROUNDS} interleaved rounds of {WINDOW} s.\n"
        "xN = pipeline time per write / bare insert time; µs = wall time per write; user +"
        " sys = this process's CPU per write (user: Python, the driver, SQLite itself; sys:"
        f" the kernel's share, fsync and sockets); cores = busy machine-wide, of {CORES},"
        " other processes included."
    )
    floor = bench_floor()
    bench_sqlite(floor)
    bench_postgres(floor)


if __name__ == "__main__":
    main()
