"""Provenance: what the flow rules stop, what they cost the user, what they cost in time.

1. The injection scenarios (``toolbound.packs.scenarios``): twelve tasks over a
   mailbox, a bank account, a drive, a calendar and web pages whose data carries
   injected instructions, played by a model that obeys them — with the flow rules,
   without them (the attacks succeed), and with a model that ignores injections
   (the legitimate cost alone).
2. The checking overhead, measured in the same run: indexing a tool result, and
   examining a call's arguments against a session's index; and the whole scenario
   run with the loop's provenance tracking on against off.

Run: ``.venv/bin/python bench/bench_provenance.py``
"""

from __future__ import annotations

import time

from benchkit import best_mean
from toolbound import ToolSpec
from toolbound.packs.scenarios import format_figures, run_scenarios
from toolbound.provenance import Provenance

PAGE = ToolSpec(
    name="web.fetch",
    version="v1",
    description="Fetch a page.",
    input_schema={"type": "object"},
    effect="read",
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
    print()
    print("examining one call's arguments against a session (µs):")
    header = "  {:<14}" + " {:>12}" * 3
    print(header.format("call", "1 result", "8 results", "64 results"))
    indexes = [session(n) for n in (1, 8, 64)]
    for name, arguments in CALLS.items():
        cells = [best_mean(lambda ix=ix, a=arguments: ix.examine(a), 500) for ix in indexes]
        print(f"  {name:<14}" + "".join(f" {c:>12.1f}" for c in cells))


def scenario_timing() -> None:
    """The twelve tasks end to end, tracking on and off, interleaved."""
    on, off = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        run_scenarios(flow_rules=False, track=False)
        off.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        run_scenarios(flow_rules=True, track=True)
        on.append(time.perf_counter() - t0)
    lo, hi = min(off) * 1e3, min(on) * 1e3
    print()
    print("twelve scenario tasks end to end (ms, best of 5, interleaved):")
    print(f"  provenance off, no flow rules  {lo:8.1f}")
    print(f"  provenance on, flow rules      {hi:8.1f}   ratio {hi / lo:.2f}")


def main() -> None:
    """Print the figures, then the costs."""
    print(format_figures(run_scenarios(), title="with flow rules (the default loop + FLOW_RULES)"))
    print()
    baseline = run_scenarios(flow_rules=False)
    print(format_figures(baseline, title="without flow rules (grants only)"))
    print()
    calm = run_scenarios(obey=False)
    print("with flow rules, a model that ignores injections:")
    print(f"  legitimate tasks completed without confirmation   {calm.legit_done_unasked:>4}")
    print(f"  legitimate calls sent to confirmation             {calm.legit_parked:>4}")
    print()
    overhead()
    scenario_timing()


if __name__ == "__main__":
    main()
