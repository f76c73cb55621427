"""One racer process: runs the same write through a real runtime, prints its outcome.

``python race_child.py LEDGER_URL EFFECTS START_AT [VARIANT]``: LEDGER_URL is
``sqlite:///PATH`` or a PostgreSQL conninfo; EFFECTS is a SQLite path or ``pg`` (the
effect table lives in the ledger's PostgreSQL database); START_AT is a POSIX time all
racers wait for, so they really race.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time

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
from toolbound.ledger.postgres import PostgresLedger
from toolbound.wiring import open_ledger

SUBJECT = Subject(id="mira", tenant="acme", session="s-1")
KEY = "order-7"  # a caller-chosen idempotency key shared by every racer


def record_effect(effects: str, conninfo: str, key: str | None, variant: str) -> None:
    """The side effect: one row in a real table."""
    if effects == "pg":
        import psycopg

        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("INSERT INTO effects (key, variant) VALUES (%s, %s)", (key, variant))
        return
    db = sqlite3.connect(effects, timeout=30, isolation_level=None)
    db.execute("INSERT INTO effects VALUES (?, ?)", (key, variant))
    db.close()


def tools(effects: str, conninfo: str) -> Registry:
    def place(args, ctx):
        time.sleep(0.2)  # long enough for every racer to arrive while it runs
        record_effect(effects, conninfo, ctx.idempotency_key, str(args["item"]))
        return {"placed": args["item"]}

    registry = Registry()
    registry.register(
        ToolSpec(
            name="place_order",
            version="v1",
            description="Place an order.",
            input_schema={
                "type": "object",
                "properties": {"item": {"type": "string"}},
                "required": ["item"],
                "additionalProperties": False,
            },
            effect="irreversible_write",
            capabilities=("orders:write",),
            idempotency="native_key",
            timeout=10.0,
        ),
        place,
    )
    return registry


def run(ledger_url: str, effects: str, variant: str = "book") -> dict[str, object]:
    ledger = (
        open_ledger(ledger_url) if ledger_url.startswith("sqlite:") else PostgresLedger(ledger_url)
    )
    grant = Grant(
        subject="mira", tenant="acme", capability="orders:write", actions=frozenset({"create"})
    )
    runtime = Runtime(policy=GrantPolicy([grant]), ledger=ledger)
    registry = tools(effects, ledger_url)
    out = runtime.run(
        Proposal(
            name="place_order", arguments=json.dumps({"item": variant}).encode(), proposal_id="c1"
        ),
        CallContext(subject=SUBJECT, tools=registry.toolset(), idempotency_key=KEY),
    )
    runtime.close()
    ledger.close()
    return {
        "kind": out.kind,
        "code": getattr(getattr(out, "problem", None), "code", None),
        "replayed": getattr(out, "replayed_from", None) is not None,
    }


def main() -> None:
    ledger_url, effects, start_at = sys.argv[1:4]
    variant = sys.argv[4] if len(sys.argv) > 4 else "book"
    time.sleep(max(0.0, float(start_at) - time.time()))
    print(json.dumps(run(ledger_url, effects, variant)), flush=True)  # noqa: T201 - for the parent


if __name__ == "__main__":
    main()
