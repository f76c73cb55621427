"""A runtime process holding its calls under a renewed lease, for the fencing tests (R9).

Run as ``python lease_child.py LEDGER_DB WORKDIR``. A thread renews the process's
lease every third of :data:`LEASE`, as the service's renewal loop does. The ``pay``
tool writes ``WORKDIR/attempt-N`` and fails its first attempt as not reached, so the
runtime waits :data:`BACKOFF` seconds and tries again — the parent stops the process
in that wait, longer than the lease. A second attempt would write ``WORKDIR/effect``.
The call's ending is printed as JSON.
"""

from __future__ import annotations

import json
import sys
import threading
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
from toolbound.execution.fence import RenewedLease
from toolbound.execution.retry import NotReached, RetryPolicy
from toolbound.ledger.sqlite import SQLiteLedger

LEASE = 1.0
BACKOFF = 4.0
"""Long enough for the parent to stop the process in it, on a busy machine."""
TIMEOUT = 60.0
"""The call's deadline is far: only the lease can stop the second attempt."""
NOT_REACHED = "the payment service refused the connection"


def registry(workdir: Path) -> Registry:
    def pay(args, ctx):
        (workdir / f"attempt-{ctx.attempt}").write_text(str(ctx.epoch))
        if ctx.attempt == 1:
            raise NotReached(NOT_REACHED)
        (workdir / "effect").write_text(str(args["amount"]))
        return {"paid": args["amount"]}

    reg = Registry()
    reg.register(
        ToolSpec(
            name="pay",
            version="v1",
            description="Pay someone.",
            input_schema={
                "type": "object",
                "properties": {"amount": {"type": "integer"}},
                "required": ["amount"],
                "additionalProperties": False,
            },
            effect="irreversible_write",
            capabilities=("payments:send",),
            idempotency="native_key",
            timeout=TIMEOUT,
            max_attempts=2,
        ),
        pay,
    )
    return reg


def renew(lease: RenewedLease, stop: threading.Event) -> None:
    """The renewal loop: every third of the lease, a renewal acknowledged at once."""
    while not stop.wait(LEASE / 3):
        lease.renewed(lease.renewing())


def main() -> None:
    ledger_db, workdir = sys.argv[1], Path(sys.argv[2])
    lease = RenewedLease(LEASE)
    stop = threading.Event()
    renewals = threading.Thread(target=renew, args=(lease, stop), daemon=True)
    renewals.start()
    grant = Grant(
        subject="mira", tenant="acme", capability="payments:send", actions=frozenset({"create"})
    )
    reg = registry(workdir)
    with (
        SQLiteLedger(ledger_db) as ledger,
        Runtime(
            policy=GrantPolicy([grant]),
            ledger=ledger,
            lease=lease,
            retry_policy=RetryPolicy(base_delay=BACKOFF, max_delay=BACKOFF),
            rng=lambda: 1.0,  # the whole backoff, no jitter
        ) as runtime,
    ):
        out = runtime.run(
            Proposal(name="pay", arguments=b'{"amount": 42}', proposal_id="call-1"),
            CallContext(subject=Subject(id="mira", tenant="acme"), tools=reg.toolset()),
        )
    stop.set()
    ending = {
        "kind": out.kind,
        "code": None if out.kind == "observed" else out.problem.code,
        "attempts": [a.outcome for a in out.result.attempts],
        "invocation_id": out.invocation_id,
    }
    sys.stdout.write(json.dumps(ending) + "\n")


if __name__ == "__main__":
    main()
