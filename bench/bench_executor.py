"""The thread hop alone: a trivial sync tool through toolbound's executor and the stdlib's.

A sync tool that is not ``inline`` runs on the executor's worker threads, so that its
deadline can abandon it. This measures that hop and nothing else: the tool returns its
arguments at once, so what is timed is handing the call to a worker and being handed
the answer back, with the deadline armed.

* **direct**: the call on the caller's thread (the floor: no hop);
* **Executor.run** / **Executor.arun**: toolbound's hop from a sync caller and from an
  async one, with a deadline, without and with a cancel event to watch;
* **ThreadPoolExecutor.submit().result()**: the stdlib's sync hop (no deadline);
* **asyncio.to_thread** and **loop.run_in_executor**: the stdlib's async hops (no
  deadline) — the first is what the OpenAI Agents SDK runs sync tools with.

Rounds of every path take turns; the best round of each is kept. Ratios are to the
fastest stdlib hop of the same kind (a sync caller's, an async caller's).

Run: ``.venv/bin/python bench/bench_executor.py`` (``--quick`` for a short run).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from benchkit import QUICK, best_of
from toolbound import Registry, Subject, ToolSpec
from toolbound._model import Invocation
from toolbound.execution.executor import Executor, RawAttempt
from toolbound.execution.tool import ToolContext

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

ARGS = {"order_id": "A-104"}
NOW = datetime(2026, 1, 1, tzinfo=UTC)
BUDGET = 30.0


def echo(args: object, _ctx: object) -> object:
    """The tool: its arguments back, at once."""
    return args


def tool_context() -> ToolContext:
    """A tool context as the runtime makes one for an attempt."""
    invocation = Invocation(
        invocation_id="inv-1",
        proposal_id="c1",
        model_call_id=None,
        tool_name="echo",
        tool_version="v1",
        arguments=ARGS,
        canonical=b'{"order_id":"A-104"}',
        digest="sha256:0",
        subject=Subject(id="mira", tenant="acme"),
        granted_capabilities=frozenset(),
        resources=(),
        idempotency_key=None,
        deadline=NOW + timedelta(seconds=BUDGET),
        trace_id="0" * 32,
    )
    return ToolContext(
        invocation=invocation, attempt=1, secrets={}, idempotency_key=None, deadline_in=BUDGET
    )


def paths(
    executor: Executor, pool: concurrent.futures.ThreadPoolExecutor
) -> dict[str, Callable[[], Awaitable[object]]]:
    """Every hop, as a coroutine function returning the tool's answer."""
    spec = ToolSpec(
        name="echo",
        version="v1",
        description="Echo.",
        input_schema={"type": "object"},
        effect="read",
    )
    tool = Registry().register(spec, echo)  # type: ignore[arg-type]
    tctx = tool_context()
    cancel = threading.Event()

    async def direct() -> object:
        return echo(ARGS, tctx)

    def sync_hop(watch: threading.Event | None) -> Callable[[], Awaitable[object]]:
        async def call() -> object:
            raw = RawAttempt(started_at=NOW)
            executor.run(tool, ARGS, tctx, raw, budget=BUDGET, cancel=watch)
            return raw.value

        return call

    def async_hop(watch: threading.Event | None) -> Callable[[], Awaitable[object]]:
        async def call() -> object:
            raw = RawAttempt(started_at=NOW)
            await executor.arun(tool, ARGS, tctx, raw, budget=BUDGET, cancel=watch)
            return raw.value

        return call

    async def submit_result() -> object:
        return pool.submit(echo, ARGS, tctx).result()

    async def to_thread() -> object:
        return await asyncio.to_thread(echo, ARGS, tctx)

    async def run_in_executor() -> object:
        return await asyncio.get_running_loop().run_in_executor(pool, echo, ARGS, tctx)

    return {
        "direct (no hop)": direct,
        "Executor.run": sync_hop(None),
        "Executor.run, cancel event": sync_hop(cancel),
        "ThreadPoolExecutor.submit().result()": submit_result,
        "Executor.arun": async_hop(None),
        "Executor.arun, cancel event": async_hop(cancel),
        "asyncio.to_thread": to_thread,
        "loop.run_in_executor": run_in_executor,
    }


SYNC_PEERS = ("ThreadPoolExecutor.submit().result()",)
ASYNC_PEERS = ("asyncio.to_thread", "loop.run_in_executor")
SYNC_OURS = ("Executor.run", "Executor.run, cancel event")
ASYNC_OURS = ("Executor.arun", "Executor.arun, cancel event")


async def main() -> None:
    """Measure every hop in interleaved rounds and print µs/call with ratios."""
    executor = Executor(max_workers=8)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=8)
    calls = paths(executor, pool)
    for name, call in calls.items():
        if await call() != ARGS:
            raise AssertionError(name)
    us = await best_of(calls, 20, rounds=150 if QUICK else 600, warmup=200)
    executor.close()
    pool.shutdown()

    sync_peer = min(SYNC_PEERS, key=us.__getitem__)
    async_peer = min(ASYNC_PEERS, key=us.__getitem__)
    print(f"a trivial sync tool, deadline {BUDGET:.0f} s; Python {sys.version.split()[0]}")
    print(f"fastest stdlib hop: sync caller {sync_peer}; async caller {async_peer}")
    print(f"{'path':<38} {'µs/call':>8} {'hop µs':>7} {'/ stdlib':>9}")
    floor = us["direct (no hop)"]
    for name, value in us.items():
        peer = sync_peer if name in SYNC_OURS else async_peer if name in ASYNC_OURS else None
        ratio = f"{value / us[peer]:>9.2f}" if peer is not None else ""
        print(f"{name:<38} {value:>8.1f} {value - floor:>7.1f}{ratio}")


if __name__ == "__main__":
    asyncio.run(main())
