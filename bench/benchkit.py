"""What the framework-integration benchmarks share: the tool, its arguments, the timer."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from toolbound import CallContext, Grant, GrantPolicy, Registry, Runtime, Subject
from toolbound.define import define

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

QUICK = "--quick" in sys.argv
ROUNDS = 3 if QUICK else 7
WARMUP = 200


@dataclass
class Found:
    """What the lookup returns."""

    order_id: str
    n: int


def lookup(order_id: str, notes: list[str]) -> Found:
    """Look up one order.

    Args:
        order_id: The order's id.
        notes: Notes to count.

    """
    return Found(order_id=order_id, n=len(notes))


def arguments(notes: int) -> str:
    """Argument text with ``notes`` strings: size grows linearly with it."""
    return json.dumps({"order_id": "A-104", "notes": [f"note {i}" for i in range(notes)]})


async def best_of(
    calls: dict[str, Callable[[], Awaitable[object]]],
    n: int,
    *,
    rounds: int = ROUNDS,
    warmup: int | None = None,
) -> dict[str, float]:
    """Best mean µs per call of each, over ``rounds`` rounds of ``n`` calls.

    The rounds take turns, so a busy moment of the machine touches every path alike;
    on a shared machine, many short rounds find its quiet moments better than a few
    long ones. Each round of a path starts with one call left out of the timing: the
    path before it has just filled the caches with its own code and data, and with
    short rounds the first call back would be charged to whichever path follows the
    heaviest one.
    """
    for call in calls.values():
        for _ in range(min(n, WARMUP) if warmup is None else warmup):
            await call()
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(rounds):
        for name, call in calls.items():
            await call()
            t0 = time.perf_counter()
            for _ in range(n):
                await call()
            best[name] = min(best[name], (time.perf_counter() - t0) / n * 1e6)
    return best


@dataclass(frozen=True)
class Setup:
    """``lookup`` as a toolbound tool: a runtime, and contexts with it inline or pooled."""

    runtime: Runtime
    inline: CallContext
    pooled: CallContext


def setup() -> Setup:
    """Register ``lookup`` twice (inline, pooled) and grant it to mira."""
    inline, pooled = Registry(), Registry()
    tool = define(lookup, effect="read", capabilities=("orders:read",))
    tool.register(inline, inline=True)
    tool.register(pooled)
    grant = Grant(
        subject="mira", tenant="acme", capability="orders:read", actions=frozenset({"read"})
    )
    mira = Subject(id="mira", tenant="acme")
    return Setup(
        runtime=Runtime(policy=GrantPolicy([grant])),
        inline=CallContext(subject=mira, tools=inline.toolset()),
        pooled=CallContext(subject=mira, tools=pooled.toolset()),
    )


def best_mean(fn: Callable[[], object], n: int, rounds: int = 7) -> float:
    """Best mean µs per call over ``rounds`` rounds of ``n`` calls."""
    means = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        means.append((time.perf_counter() - t0) / n * 1e6)
    return min(means)
