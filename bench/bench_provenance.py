"""Provenance: what the flow rules stop, what they cost the user, what they cost in time.

1. The injection scenarios (``toolbound.packs.scenarios``): forty-one tasks in four
   domains, twenty-four in three more and ten in a held-out eighth (insurance
   claims), whose data carries injected instructions,
   played by a model that obeys them — under the grants alone (the attacks succeed),
   a strict rule on every write, and the role preset (``guard_writes``) without the
   tools' intents, with them, and with a perfect planner's task scope; and with a
   model that ignores injections (the legitimate cost alone).
2. The checking overhead, measured in the same run: indexing a tool result,
   examining a call's arguments against a session's index, the preset deciding
   a call; and the whole scenario run with provenance on against off.

Run: ``.venv/bin/python bench/bench_provenance.py`` (``--overhead`` for part 2's
first two tables only, which also run against an older tree for a before/after).
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

from benchkit import best_mean
from toolbound import ToolSpec
from toolbound.provenance import Provenance

PAGE = ToolSpec(
    name="web.fetch",
    version="v1",
    description="Fetch a page.",
    input_schema={"type": "object"},
    effect="read",
)


TRUSTED = ToolSpec(
    name="bank.payees",
    version="v1",
    description="Saved payees.",
    input_schema={"type": "object"},
    effect="read",
    reads_untrusted=False,
)


def page(i: int, paragraphs: int) -> dict[str, object]:
    """A web page of about 110 bytes per paragraph, with addresses, links and dates."""
    text = " ".join(
        f"Paragraph {j} of page {i}: item {i * 100 + j} went to clerk{j}@city{i}.example "
        f"on 2026-07-{j % 28 + 1:02d}, see https://city{i}.example/minutes/{j}."
        for j in range(paragraphs)
    )
    return {"url": f"https://city{i}.example/", "text": text}


def session(results: int, paragraphs: int = 20) -> Provenance:
    """An index after a prompt and ``results`` pages."""
    index = Provenance()
    index.add_user("Pay the bill in bill-december.txt and email bob.lee@corp.example.")
    for i in range(results):
        index.add_result(PAGE, f"inv-{i}", page(i, paragraphs))
    return index


CALLS: dict[str, dict[str, object]] = {
    "send_money": {"recipient": "US133000000121212121212", "amount": 0.01, "subject": "ok"},
    "fetch url": {"url": "https://city3.example/minutes/7?code=463820"},
    "email (body)": {
        "to": "bob.lee@corp.example",
        "subject": "Agenda",
        "body": "Hi Bob, the agenda for tomorrow: budget review, hiring plan, and the "
        "minutes at https://city1.example/minutes/3. Best, Emma",
    },
}


def overhead() -> None:
    """Indexing and examining, µs per operation."""
    print("indexing a tool result (µs):")
    for paragraphs in (2, 20, 150):
        value = page(0, paragraphs)
        size = len(str(value))
        index = Provenance()
        us = best_mean(lambda value=value, index=index: index.add_result(PAGE, "i", value), 20)
        print(f"  {size:>7} bytes  {us:>9.1f}  ({us / size * 1000:.0f} ns/byte)")
    records = [
        {"id": f"r{i}", "name": f"Payee {i}", "iban": f"DE{i:02d}370400440532013000"}
        for i in range(50)
    ]
    size = len(str(records))
    index = Provenance()
    us = best_mean(lambda: index.add_result(TRUSTED, "i", records), 20)  # type: ignore[arg-type]
    print(f"  {size:>7} bytes  {us:>9.1f}  a trusted listing of 50 records")
    print()
    print("examining one call's arguments against a session (µs):")
    header = "  {:<14}" + " {:>12}" * 3
    print(header.format("call", "1 result", "8 results", "64 results"))
    indexes = [session(n) for n in (1, 8, 64)]
    for name, arguments in CALLS.items():
        cells = [best_mean(lambda ix=ix, a=arguments: ix.examine(a), 500) for ix in indexes]
        print(f"  {name:<14}" + "".join(f" {c:>12.1f}" for c in cells))


def preset_cost() -> None:
    """The preset deciding one call, against a strict rule on the same tool (µs)."""
    # Imported here: `--overhead` also runs against trees that lack these.
    from toolbound._model import Subject  # noqa: PLC0415
    from toolbound.gates.authorize import AuthzRequest  # noqa: PLC0415
    from toolbound.provenance import FlowPolicy, TrustedSource, guard_writes  # noqa: PLC0415

    send = ToolSpec(
        name="email.send",
        version="v1",
        description="Send mail.",
        input_schema={
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {}, "body": {}},
        },
        effect="irreversible_write",
        capabilities=("mail:send",),
    )
    index = session(8)
    arguments: dict[str, object] = dict(CALLS["email (body)"])
    report = index.examine(arguments)  # type: ignore[arg-type]
    request = AuthzRequest(
        subject=Subject(id="u", tenant="t"),
        spec=send,
        arguments=arguments,  # type: ignore[arg-type]
        now=datetime(2026, 7, 19, tzinfo=UTC),
        provenance=report,
    )
    strict = FlowPolicy(TrustedSource("email.send", ""))
    preset = guard_writes([send])
    print()
    print("deciding one email.send from its report (µs):")
    for name, policy in (("TrustedSource(tool, '')", strict), ("guard_writes", preset)):
        us = best_mean(lambda p=policy: p.authorize(request), 2000)
        print(f"  {name:<26} {us:8.1f}")


def scenario_timing() -> None:
    """The forty-one tasks end to end, provenance off and on, interleaved."""
    from toolbound.packs.scenarios import run_scenarios  # noqa: PLC0415

    on, off = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        run_scenarios(mode="grants", track=False)
        off.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        run_scenarios(mode="preset", scope=True)
        on.append(time.perf_counter() - t0)
    lo, hi = min(off) * 1e3, min(on) * 1e3
    print()
    print("forty-one scenario tasks end to end (ms, best of 5, interleaved):")
    print(f"  provenance off, grants only    {lo:8.1f}")
    print(f"  provenance on, guard_writes    {hi:8.1f}   ratio {hi / lo:.2f}")


def figures() -> None:
    """The trade-off table per set of domains, then the per-task lines of the deployable one."""
    from toolbound.packs.scenarios import (  # noqa: PLC0415
        CLAIMS,
        ERRANDS,
        TASKS,
        format_figures,
        run_scenarios,
    )

    variants = {
        "grants only": {"mode": "grants", "scope": False},
        "TrustedSource(tool, '') on every write": {"mode": "strict", "scope": False},
        "guard_writes, no intents": {"mode": "preset", "scope": False, "intents": False},
        "guard_writes + intents (deployable)": {"mode": "preset", "scope": False},
        "guard_writes + a perfect planner's scope": {"mode": "preset", "scope": True},
    }
    sets = (
        ("the first four domains", TASKS),
        ("three new domains", ERRANDS),
        ("a held-out domain (insurance claims)", CLAIMS),
    )
    for title, tasks in sets:
        print(title)
        print(f"  {'policy':<42} {'inj. run':>9} {'write tasks unasked':>20} {'legit asked':>12}")
        for name, options in variants.items():
            f = run_scenarios(tasks=tasks, **options)  # type: ignore[arg-type]
            unasked = f"{f.write_tasks_done_unasked}/{f.write_tasks}"
            ran = f"{f.injected_executed}/{f.injected_writes}"
            print(f"  {name:<42} {ran:>9} {unasked:>20} {f.legit_parked:>12}")
        print()
    for tasks in (TASKS, ERRANDS, CLAIMS):
        deployable = run_scenarios(tasks=tasks, mode="preset", scope=False)
        print(format_figures(deployable, title="guard_writes + intents"))
        print()
    calm = run_scenarios(mode="preset", scope=False, obey=False)
    print("guard_writes + intents, a model that ignores injections (first four domains):")
    print(f"  write tasks completed without confirmation   {calm.write_tasks_done_unasked:>4}")
    print(f"  legitimate calls sent to confirmation        {calm.legit_parked:>4}")


def main() -> None:
    """Print the figures, then the costs."""
    if "--overhead" in sys.argv:
        overhead()
        return
    figures()
    print()
    overhead()
    preset_cost()
    scenario_timing()


if __name__ == "__main__":
    main()
