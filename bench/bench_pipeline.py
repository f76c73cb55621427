"""The full read-only path against a bare baseline measured in the same run.

toolbound: parse → validate → normalize → digest → authorize → execute a trivial
read tool → validate the result → redact → encode, with the trace recorded.
Baseline: ``json.loads`` + a compiled jsonschema-rs validator + the function call.

Run: ``.venv/bin/python bench/bench_pipeline.py``
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import jsonschema_rs

from benchkit import best_mean
from toolbound import (
    AllOf,
    CallContext,
    Grant,
    GrantPolicy,
    Proposal,
    Registry,
    Runtime,
    Subject,
    ToolSpec,
)
from toolbound.gates.normalize import canonical_json, digest
from toolbound.gates.parse import parse_arguments
from toolbound.provenance import FlowPolicy, NoPrivateData, Provenance, TrustedSource

SCHEMA = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "pattern": r"^[A-Z]-\d{3}$"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["order_id"],
    "additionalProperties": False,
}
OUT = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "n": {"type": "integer"}},
    "required": ["order_id", "n"],
    "additionalProperties": False,
}


def lookup(args: dict, _ctx: object = None) -> dict:
    """The trivial tool: echo the id, count the notes."""
    return {"order_id": args["order_id"], "n": len(args.get("notes", ()))}


async def alookup(args: dict, _ctx: object = None) -> dict:
    """The same tool, async."""
    return lookup(args)


def arguments(notes: int) -> bytes:
    """Argument bytes with ``notes`` strings: size grows linearly with it."""
    return json.dumps({"order_id": "A-104", "notes": [f"note {i}" for i in range(notes)]}).encode()


def spec(name: str) -> ToolSpec:
    """A read tool over SCHEMA/OUT."""
    return ToolSpec(
        name=name,
        version="v1",
        description="Look up one order.",
        input_schema=SCHEMA,
        output_schema=OUT,
        effect="read",
        capabilities=("orders:read",),
    )


def row(notes: int, size: int, base: float, path: str, us: float) -> None:
    """Print one line of the table."""
    print(f"{notes:>10} {size:>7} {base:>12.2f} {path:>10} {us:>8.2f} {us / base:>6.1f}")


def main() -> None:  # noqa: C901 - one script, read top to bottom
    """Measure and print."""
    registry = Registry()
    registry.register(spec("inline"), lookup, inline=True)
    registry.register(spec("pooled"), lookup)
    registry.register(spec("coroutine"), alookup)
    grant = Grant(
        subject="mira", tenant="acme", capability="orders:read", actions=frozenset({"read"})
    )
    runtime = Runtime(policy=GrantPolicy([grant]))
    ctx = CallContext(subject=Subject(id="mira", tenant="acme"), tools=registry.toolset())
    validator = jsonschema_rs.validator_for(SCHEMA)

    print(f"{'arguments':>10} {'bytes':>7} {'baseline µs':>12} {'path':>10} {'µs':>8} {'ratio':>6}")
    for notes in (0, 30, 300, 3000):
        data = arguments(notes)
        n = max(200, 20_000 // (notes + 1))

        def baseline(data: bytes = data) -> object:
            args = json.loads(data)
            if not validator.is_valid(args):
                raise AssertionError
            return lookup(args)

        base = best_mean(baseline, n)
        for name in ("inline", "pooled"):
            p = Proposal(name=name, arguments=data, proposal_id="c1")

            def through(p: Proposal = p) -> object:
                out = runtime.run(p, ctx)
                if out.kind != "observed":
                    raise AssertionError(out)
                return out

            us = best_mean(through, max(100, n // 4))
            row(notes, len(data), base, name, us)

        async def async_path(data: bytes = data, k: int = max(100, n // 4)) -> float:
            p = Proposal(name="coroutine", arguments=data, proposal_id="c1")
            times = []
            for _ in range(7):
                t0 = time.perf_counter()
                for _ in range(k):
                    await runtime.arun(p, ctx)
                times.append((time.perf_counter() - t0) / k * 1e6)
            return min(times)

        us = asyncio.run(async_path())
        row(notes, len(data), base, "arun+async", us)
    runtime.close()

    provenance(registry, grant)

    # Where the time goes on small arguments: stage by stage, same run.
    small = arguments(0)
    args = parse_arguments(small)
    tool = registry.get("inline", "v1")
    assert tool is not None
    stages = {
        "json.loads": lambda: json.loads(small),
        "parse_arguments": lambda: parse_arguments(small),
        "validate (jsonschema-rs)": lambda: tool.input.validate(args),
        "canonical_json": lambda: canonical_json(args),
        "canonical + digest": lambda: digest(
            tenant="acme", tool_name="inline", tool_version="v1", canonical=canonical_json(args)
        ),
    }
    print()
    print("stage costs on small arguments (µs/call):")
    for label, fn in stages.items():
        print(f"  {label:<26} {best_mean(fn, 20_000):6.2f}")


def session() -> Provenance:
    """A loop's index after a prompt and eight tool results of about 2 KB each."""
    index = Provenance()
    index.add_user("Look up order A-104 and tell me what its notes say.")
    page = spec("web.fetch")
    for i in range(8):
        text = " ".join(
            f"Paragraph {j} of page {i}: item {i * 100 + j} went to clerk{j}@city{i}.example "
            f"on 2026-07-{j % 28 + 1:02d}, see https://city{i}.example/minutes/{j}."
            for j in range(20)
        )
        index.add_result(page, f"inv-{i}", {"url": f"https://city{i}.example/", "text": text})
    return index


def provenance(registry: Registry, grant: Grant) -> None:
    """The inline path with provenance on, as the loop runs it, against it off.

    On: the call carries the session's index (examined, traced, handed to the
    policy) and the policy is the grants plus flow rules guarding this tool's
    parameters. Off: the same runtime path with the grants alone. Both run in
    the same rounds, interleaved, so load on the machine hits both alike.
    """
    index = session()
    rules = FlowPolicy(
        TrustedSource("inline", "/order_id", strict=False), NoPrivateData("inline", "/notes")
    )
    off_rt = Runtime(policy=GrantPolicy([grant]))
    on_rt = Runtime(policy=AllOf(GrantPolicy([grant]), rules))
    off_ctx = CallContext(subject=Subject(id="mira", tenant="acme"), tools=registry.toolset())
    on_ctx = replace(off_ctx, provenance=index)
    print()
    print("provenance on (index of a prompt + 8 results of ~2 KB, flow rules) vs off, inline:")
    print(
        f"{'arguments':>10} {'off µs':>9} {'on µs':>9} {'+µs':>8} {'ratio':>6} {'examine µs':>11}"
    )
    for notes in (0, 30, 300):
        data = arguments(notes)
        p = Proposal(name="inline", arguments=data, proposal_id="c1")
        n = max(50, 5_000 // (notes + 1))
        off, on = [], []
        for _ in range(7):
            off.append(best_mean(lambda p=p: off_rt.run(p, off_ctx), n, rounds=1))
            on.append(best_mean(lambda p=p: on_rt.run(p, on_ctx), n, rounds=1))
        check = on_rt.run(p, on_ctx)
        if check.kind != "observed" or not check.trace.of_kind("provenance"):
            raise AssertionError(check)
        parsed = json.loads(data)
        alone = best_mean(lambda parsed=parsed: index.examine(parsed), n)
        lo, hi = min(off), min(on)
        print(f"{notes:>10} {lo:>9.2f} {hi:>9.2f} {hi - lo:>8.2f} {hi / lo:>6.2f} {alone:>11.2f}")
    off_rt.close()
    on_rt.close()


if __name__ == "__main__":
    main()
