"""The seeds' scenarios, end to end, on the example packs (``toolbound demo``).

Each scenario runs a real proposal through a real :class:`~toolbound.Runtime`; the
report shows every call's state path and outcome, and the facts the seeds ask to
prove (the backend's call counter, the snapshot hash, the confirmed digest).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from toolbound._clock import FixedClock
from toolbound._model import Proposal, Subject
from toolbound.execution.reconcile import Reconciler
from toolbound.gates.authorize import Grant, GrantPolicy, IdScope, OwnerScope, PathScope
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.packs import calendar, files, orders, payments, weather
from toolbound.pipeline.runtime import CallContext, Runtime
from toolbound.registry import Registry

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound._outcome import Outcome

__all__ = ["Scenario", "run_demo"]

# The seed's reference instant: 2026-07-19 14:00 in Asia/Shanghai.
REFERENCE = datetime(2026, 7, 19, 14, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario: what was proposed, what happened, and what it proves."""

    title: str
    outcome: Outcome
    facts: dict[str, object] = field(default_factory=dict)


def _grants(workspace: Path) -> list[Grant]:
    return [
        Grant(
            subject="mira",
            tenant="acme",
            capability="orders:read",
            actions=frozenset({"read"}),
            scope=OwnerScope(),
        ),
        Grant(
            subject="leo",
            tenant="acme",
            capability="orders:read",
            actions=frozenset({"read"}),
            scope=OwnerScope(),
        ),
        Grant(
            subject="mira", tenant="acme", capability="weather:read", actions=frozenset({"read"})
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="calendar:write",
            actions=frozenset({"create", "modify"}),
            scope=IdScope(frozenset({"work"})),
            confirm=True,
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="files:read",
            actions=frozenset({"read"}),
            scope=PathScope(workspace),
        ),
        Grant(
            subject="mira",
            tenant="acme",
            capability="payments:send",
            actions=frozenset({"create"}),
            scope=IdScope(frozenset({"leo", "landlord"})),
        ),
    ]


def run_demo() -> list[Scenario]:  # noqa: PLR0915 - a script of scenarios reads best straight
    """Run every scenario and return them in order."""
    clock = FixedClock(REFERENCE.astimezone(ZoneInfo("UTC")))
    backend = orders.OrdersBackend()
    poisoned = orders.OrdersBackend(poisoned=True)
    cal = calendar.CalendarBackend()
    bank = payments.PaymentsBackend()
    out: list[Scenario] = []
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp, "workspace")
        workspace.mkdir()
        (workspace / "notes.txt").write_text("A-104: customer asked about delivery.\n")
        Path(tmp, "secret.txt").write_text("not for the model\n")
        (workspace / "escape.txt").symlink_to(Path(tmp, "secret.txt"))

        registry = Registry()
        orders.register(registry, backend)
        calendar.register(registry, cal)
        weather.register(registry)
        files.register(registry, workspace)
        payments.register(registry, bank)
        poisoned_registry = Registry()
        orders.register(poisoned_registry, poisoned)

        # The embedded default ledger: one SQLite file (WAL, synchronous=FULL).
        ledger = SQLiteLedger(Path(tmp, "ledger.db"))
        runtime = Runtime(policy=GrantPolicy(_grants(workspace)), clock=clock, ledger=ledger)
        mira = Subject(id="mira", tenant="acme", session="s-1")
        ctx = CallContext(
            subject=mira, tools=registry.toolset(), timezone="Asia/Shanghai", timeout=5.0
        )
        before = backend.snapshot_hash()

        def call(name: str, arguments: str, call_id: str, context: CallContext = ctx) -> Outcome:
            proposal = Proposal(name=name, arguments=arguments.encode(), proposal_id=call_id)
            return runtime.run(proposal, context)

        a104 = call("get_order", '{"order_id":"A-104"}', "call_1")
        out.append(
            Scenario(
                "mira reads her order A-104",
                a104,
                {"as_of": _data(a104).get("as_of"), "backend_calls": backend.calls},
            )
        )
        calls_before = backend.calls
        b205 = call("get_order", '{"order_id":"B-205"}', "call_2")
        out.append(
            Scenario(
                "mira asks for leo's order B-205",
                b205,
                {"backend_calls_for_this_call": backend.calls - calls_before},
            )
        )
        principal = call("get_order", '{"order_id":"B-205","principal":"leo"}', "call_3")
        out.append(
            Scenario(
                'the model adds "principal": "leo"',
                principal,
                {"backend_calls_for_this_call": backend.calls - calls_before},
            )
        )
        unknown = call("cancel_order", '{"order_id":"A-104"}', "call_4")
        out.append(Scenario("the model calls cancel_order, which does not exist", unknown))
        dup = call("get_order", '{"order_id":"B-205","order_id":"A-104"}', "call_5")
        out.append(Scenario("a duplicate key smuggles a second order id", dup))
        poisoned_ctx = CallContext(subject=mira, tools=poisoned_registry.toolset())
        injected = call("get_order", '{"order_id":"A-104"}', "call_6", poisoned_ctx)
        out.append(
            Scenario(
                "the backend adds an 'instruction' field to the result",
                injected,
                {"injected_text_reached_model": b"cancel this order" in injected.message.content},
            )
        )
        out.append(
            Scenario(
                "the snapshot is unchanged after every read",
                a104,
                {"snapshot_hash_unchanged": backend.snapshot_hash() == before},
            )
        )
        forecast = call("weather.forecast", '{"city":"Shanghai","date":"2026-07-20"}', "call_7")
        out.append(Scenario("mira asks for tomorrow's weather", forecast))
        escape = call("read_file", '{"path":"escape.txt"}', "call_8")
        out.append(Scenario("read_file through a symlink that leads outside", escape))
        notes = call("read_file", '{"path":"notes.txt"}', "call_9")
        out.append(Scenario("read_file inside the workspace", notes))

        event = '{"calendar_id":"work","title":"Design review","date":"tomorrow","start":"09:00"}'
        parked = call("calendar.create_event", event, "call_10")
        out.append(
            Scenario(
                "mira asks for a meeting tomorrow at 09:00",
                parked,
                {"writes_so_far": cal.writes},
            )
        )
        if parked.kind == "awaiting_confirmation":
            changed = call("calendar.create_event", event.replace("09:00", "23:00"), "call_11")
            out.append(
                Scenario(
                    "the model changes the time after asking",
                    changed,
                    {
                        "same_digest_as_first": changed.kind == "awaiting_confirmation"
                        and changed.request.digest == parked.request.digest,
                    },
                )
            )
            if changed.kind == "awaiting_confirmation":
                runtime.cancel_pending(changed.invocation_id)
            clock.advance(30)
            done = runtime.approve(
                parked.invocation_id, digest=parked.request.digest, approver="mira (in the app)"
            )
            out.append(
                Scenario(
                    "mira approves the call she was shown, by its digest",
                    done,
                    {
                        "normalized_date": parked.request.arguments.get("date"),
                        "digest": parked.request.digest,
                        "writes": cal.writes,
                    },
                )
            )
            again = call("calendar.create_event", event, "call_12")
            if again.kind == "awaiting_confirmation":
                replay = runtime.approve(
                    again.invocation_id,
                    digest=again.request.digest,
                    approver="mira (in the app)",
                    ttl=timedelta(minutes=5),
                )
                out.append(
                    Scenario(
                        "the same call is proposed and approved again",
                        replay,
                        {"writes": cal.writes},
                    )
                )
        _payment_scenarios(out, runtime, registry, bank, call)
        runtime.close()
        ledger.close()
    return out


def _payment_scenarios(
    out: list[Scenario],
    runtime: Runtime,
    registry: Registry,
    bank: payments.PaymentsBackend,
    call: Callable[[str, str, str], Outcome],
) -> None:
    """A lost response, resolved at once by asking; and one resolved only later."""
    bank.lose_next_response = True
    asked = call("payments.send", '{"amount": 4200, "to": "leo"}', "call_20")
    out.append(
        Scenario(
            "a payment's response is lost; the runtime asks the bank by key",
            asked,
            {"payments_made": len(bank.payments)},
        )
    )
    bank.lose_next_response = True
    bank.unreachable_for_queries = True
    rent = '{"amount": 90000, "to": "landlord"}'
    unknown = call("payments.send", rent, "call_21")
    again = call("payments.send", rent, "call_22")
    out.append(
        Scenario(
            "another payment's response is lost and the bank cannot be asked",
            unknown,
            {
                "payments_made": len(bank.payments),
                "same_payment_again": getattr(getattr(again, "problem", None), "code", None),
            },
        )
    )
    bank.unreachable_for_queries = False
    reconciler = Reconciler(ledger=runtime.ledger, registry=registry, clock=runtime.clock)
    (resolved,) = reconciler.reconcile()
    replay = call("payments.send", rent, "call_23")
    out.append(
        Scenario(
            "later, the reconciler asks the bank and the payment replays",
            replay,
            {
                "reconciled": resolved.status,
                "evidence": dict(resolved.evidence).get("backend"),
                "payments_made": len(bank.payments),
            },
        )
    )


def _data(outcome: Outcome) -> dict[str, object]:
    data = outcome.message.payload.get("data")
    return dict(data) if isinstance(data, dict) else {}
