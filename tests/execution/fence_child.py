"""A runtime process whose write is paused (SIGSTOP) mid-tool, for the fencing tests (R9).

Run as ``python fence_child.py KIND TARGET WORKDIR`` (KIND ``sqlite``: TARGET is the
ledger's file; ``postgres``: a connection string). The tool writes ``WORKDIR/in_tool``
(its epoch) once it has started and waits for ``WORKDIR/go``: the parent stops the
process there, and lets it go on only as it resumes it. Then the tool makes its
effect: one row in ``payments``, a table in the ledger's own database, inserted only
while the ledger still holds the tool's key under the tool's epoch in ``executing``
(a compare-and-set on the epoch, as ``docs/execution.md`` describes); refused, the
tool says nothing was paid (``NotCommitted``). What the insert changed goes to
``WORKDIR/effect``, and the call's ending, with the ledger's answer to the runtime's
last write, is printed.

The parent test imports :func:`registry`, :func:`payments` and the constants, so both
processes run the same tool against the same downstream.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

from toolbound import (
    CallContext,
    Grant,
    GrantPolicy,
    NotCommitted,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.ledger.migrations import LEDGER_TABLE
from toolbound.ledger.sqlite import SQLiteLedger

SUBJECT = Subject(id="mira", tenant="acme", session="s-1")
ARGUMENTS = b'{"amount": 42, "to": "leo"}'
TIMEOUT = 3.0
"""The tool's deadline, in seconds: the paused process is stopped well past it."""
STALE = "another owner holds this payment's key under a newer epoch"
GO_WAIT = 60.0
"""The longest the tool waits for ``go`` (a bound, should the parent never write it)."""

_PAYMENTS = "CREATE TABLE IF NOT EXISTS payments (key TEXT PRIMARY KEY, epoch INTEGER)"
# The effect, fenced by the ledger itself: one statement, so nothing can take the call
# over between the check and the write (SQLite: under its write lock; PostgreSQL: the
# ledger row is locked FOR SHARE, so a takeover's FOR UPDATE waits for it).
_FENCED_INSERT = f"""
    INSERT INTO payments (key, epoch)
    SELECT {{p}}, {{p}} WHERE EXISTS (
        SELECT 1 FROM {LEDGER_TABLE}
        WHERE scope = {{p}} AND tool_version = {{p}} AND key = {{p}} AND epoch = {{p}}
          AND phase = 'executing' {{lock}})
"""  # noqa: S608 - the table name is a constant


def connect(kind: str, target: str):
    """A DB-API connection to the downstream (the ledger's own database), autocommit."""
    if kind == "sqlite":
        return sqlite3.connect(target, isolation_level=None, timeout=10)
    import psycopg

    return psycopg.connect(target, autocommit=True)


def ledger_of(kind: str, target: str):
    """The shared ledger: the SQLite file, or the PostgreSQL schema of the connection."""
    if kind == "sqlite":
        return SQLiteLedger(target)
    from toolbound.ledger.postgres import PostgresLedger

    return PostgresLedger(target)


def payments(kind: str, target: str) -> list[tuple[str, int]]:
    """Every effect made so far: (key, the epoch that made it)."""
    with closing(connect(kind, target)) as db:
        db.execute(_PAYMENTS)
        return [tuple(r) for r in db.execute("SELECT key, epoch FROM payments").fetchall()]


def registry(kind: str, target: str, workdir: Path | None = None) -> Registry:
    """The ``pay`` tool: says it started, waits, then pays under its epoch's fence."""
    p, lock = ("?", "") if kind == "sqlite" else ("%s", "FOR SHARE")
    insert = _FENCED_INSERT.format(p=p, lock=lock)

    def pay(args, ctx):
        if workdir is not None:
            (workdir / "in_tool").write_text(str(ctx.epoch))
            until = time.monotonic() + GO_WAIT
            while not (workdir / "go").exists() and time.monotonic() < until:
                time.sleep(0.02)
        tenant = ctx.invocation.subject.tenant
        params = (ctx.idempotency_key, ctx.epoch, tenant, "pay@v1", ctx.idempotency_key, ctx.epoch)
        with closing(connect(kind, target)) as db:
            db.execute(_PAYMENTS)
            changed = db.execute(insert, params).rowcount
        if workdir is not None:
            (workdir / "effect").write_text(str(changed))
        if changed != 1:
            # The downstream refused a stale owner: nothing was paid.
            raise NotCommitted(STALE, code="stale_epoch")
        return {"paid": args["amount"]}

    reg = Registry()
    reg.register(
        ToolSpec(
            name="pay",
            version="v1",
            description="Pay someone.",
            input_schema={
                "type": "object",
                "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
                "required": ["amount", "to"],
                "additionalProperties": False,
            },
            effect="irreversible_write",
            capabilities=("payments:send",),
            idempotency="native_key",
            timeout=TIMEOUT,
        ),
        pay,
    )
    return reg


def runtime(ledger) -> Runtime:
    grant = Grant(
        subject="mira",
        tenant="acme",
        capability="payments:send",
        actions=frozenset({"create", "modify", "delete"}),
    )
    return Runtime(policy=GrantPolicy([grant]), ledger=ledger)


def pay_once(reg: Registry, ledger, call_id: str):
    """The agent's proposal, run once."""
    with runtime(ledger) as rt:
        return rt.run(
            Proposal(name="pay", arguments=ARGUMENTS, proposal_id=call_id),
            CallContext(subject=SUBJECT, tools=reg.toolset()),
        )


def main() -> None:
    kind, target, workdir = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    ledger = ledger_of(kind, target)
    done = threading.Event()
    reg = registry(kind, target, workdir)
    out = pay_once(reg, ledger, "call-1")
    # The runtime stopped waiting at the deadline; the tool's thread runs on. Wait for
    # it to try its effect, so the parent sees what the paused tool did.
    for _ in range(100):
        if (workdir / "effect").exists():
            done.set()
            break
        time.sleep(0.05)
    codes = [e.data.get("code") for e in out.trace.events if e.kind == "ledger_write_failed"]
    ending = {"kind": out.kind, "ledger_write_failed": codes, "tool_done": done.is_set()}
    sys.stdout.write(json.dumps(ending) + "\n")
    ledger.close()


if __name__ == "__main__":
    main()
