"""A runtime process that kills itself (SIGKILL) at one phase boundary of a write.

Run as ``python crash_child.py LEDGER_DB EFFECTS_DB KILL_POINT``. The tool's side
effect is a row in a real SQLite table (EFFECTS_DB) carrying the idempotency key, so
the parent can count effects and a query hook can ask what happened to a key.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
from pathlib import Path

from toolbound import (
    CallContext,
    Grant,
    GrantPolicy,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.execution.reconcile import RemoteCommitted, RemoteNotCommitted
from toolbound.ledger.sqlite import SQLiteLedger

KILL_POINTS = ("after_claim", "after_effect", "after_commit_record", "none")
SUBJECT = Subject(id="mira", tenant="acme", session="s-1")
ARGUMENTS = b'{"amount": 42, "to": "leo"}'


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class KillingLedger:
    """Passes everything to a real ledger, and dies right after the chosen write."""

    def __init__(self, inner: SQLiteLedger, point: str) -> None:
        self.inner = inner
        self.point = point
        self.retention = inner.retention
        self.expired = inner.expired

    def claim_executing(self, intent, *, now):
        # The claim and 'executing' are one commit: dying here is dying after both,
        # before the tool starts.
        claim = self.inner.claim_executing(intent, now=now)
        if self.point == "after_claim":
            die()
        return claim

    def advance(self, key, **kw):
        self.inner.advance(key, **kw)
        if (self.point, kw["phase"]) == ("after_commit_record", "committed"):
            die()

    def __getattr__(self, name):
        return getattr(self.inner, name)


def effects(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS payments (key TEXT, amount INTEGER, payee TEXT)")
    return db


def registry(effects_db: str, point: str = "none", *, with_query: bool = True) -> Registry:
    def pay(args, ctx):
        db = effects(effects_db)
        db.execute(
            "INSERT INTO payments VALUES (?, ?, ?)",
            (ctx.idempotency_key, args["amount"], args["to"]),
        )
        db.close()
        if point == "after_effect":
            die()
        return {"paid": args["amount"]}

    def query(call):
        db = effects(effects_db)
        rows = db.execute(
            "SELECT amount FROM payments WHERE key = ?", (call.idempotency_key,)
        ).fetchall()
        db.close()
        if rows:
            return RemoteCommitted(value={"paid": rows[0][0]}, evidence={"rows": len(rows)})
        return RemoteNotCommitted(evidence={"rows": 0})

    reg = Registry()
    reg.register(
        ToolSpec(
            name="pay",
            version="v1",
            description="Send money.",
            input_schema={
                "type": "object",
                "properties": {"amount": {"type": "integer"}, "to": {"type": "string"}},
                "required": ["amount", "to"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {"paid": {"type": "integer"}},
                "required": ["paid"],
                "additionalProperties": False,
            },
            effect="irreversible_write",
            capabilities=("payments:send",),
            idempotency="query_by_key",
            query=query if with_query else None,
            timeout=1.0,
        ),
        pay,
    )
    return reg


def runtime(ledger: object, clock: object | None = None) -> Runtime:
    grant = Grant(
        subject="mira", tenant="acme", capability="payments:send", actions=frozenset({"create"})
    )
    return Runtime(policy=GrantPolicy([grant]), ledger=ledger, clock=clock)  # type: ignore[arg-type]


def call(rt: Runtime, reg: Registry):
    return rt.run(
        Proposal(name="pay", arguments=ARGUMENTS, proposal_id="call_1"),
        CallContext(subject=SUBJECT, tools=reg.toolset()),
    )


def main() -> None:
    ledger_db, effects_db, point = sys.argv[1:4]
    assert point in KILL_POINTS
    Path(effects_db).touch()
    ledger = KillingLedger(SQLiteLedger(ledger_db), point)
    rt = runtime(ledger)
    out = call(rt, registry(effects_db, point))
    print(out.kind, flush=True)  # noqa: T201 - the parent reads it
    rt.close()


if __name__ == "__main__":
    main()
