"""Several tool calls from one model response (R16).

* Results pair with calls by id, never by order; a repeated call id is refused.
* ``pure`` and ``read`` calls run concurrently, at most ``concurrency`` at once.
* Writes run one at a time, in the model's order, and each one is a barrier: reads
  the model listed after a write start only once it has finished, so a read never
  races a write it may depend on.
* Every call keeps its own outcome; a batch is never "all succeeded" or "all
  failed" as one.
* The messages sent back share one byte budget, spent in the model's order; a
  call past the budget still gets the smallest envelope that says its result was
  cut, with a continuation handle (at most 256 bytes).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolbound.problems import make_problem

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from toolbound._model import Proposal
    from toolbound._outcome import Outcome
    from toolbound.pipeline.runtime import CallContext, Runtime

__all__ = ["BatchOutcome", "arun_batch", "run_batch"]

_SMALLEST_MESSAGE = 256  # below this a result cannot even say it was cut


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchOutcome:
    """Each call's own outcome, in the model's order, and the bytes sent back."""

    outcomes: tuple[Outcome, ...]
    by_id: Mapping[str, Outcome] = field(hash=False)
    result_bytes: int

    def __getitem__(self, proposal_id: str) -> Outcome:
        """The outcome of the call with this id."""
        return self.by_id[proposal_id]


def _groups(proposals: Sequence[Proposal], context: CallContext) -> list[tuple[bool, list[int]]]:
    """Split into runs: consecutive reads form one concurrent group; a write stands alone."""
    groups: list[tuple[bool, list[int]]] = []
    for i, p in enumerate(proposals):
        tool = context.tools.lookup(p.name, p.version)
        # An unknown tool is rejected without executing; it may run with the reads.
        concurrent = tool is None or not tool.spec.is_write
        if concurrent and groups and groups[-1][0]:
            groups[-1][1].append(i)
        else:
            groups.append((concurrent, [i]))
    return groups


def _duplicates(
    runtime: Runtime, proposals: Sequence[Proposal], context: CallContext
) -> dict[int, Outcome]:
    seen: set[str] = set()
    refused: dict[int, Outcome] = {}
    for i, p in enumerate(proposals):
        if p.proposal_id in seen:
            refused[i] = runtime.reject(
                p,
                context,
                make_problem(
                    "duplicate_call_id",
                    f"call id {p.proposal_id!r} appears twice in one response",
                    hint="give every call its own id",
                ),
            )
        seen.add(p.proposal_id)
    return refused


def _finish(runtime: Runtime, ordered: list[Outcome], result_budget: int | None) -> BatchOutcome:
    if result_budget is not None:
        remaining = result_budget
        for i, outcome in enumerate(ordered):
            if len(outcome.message.content) > remaining:
                ordered[i] = runtime.shrink(outcome, max(remaining, _SMALLEST_MESSAGE))
            remaining = max(0, remaining - len(ordered[i].message.content))
    by_id: dict[str, Outcome] = {}
    for outcome in ordered:
        by_id.setdefault(outcome.proposal_id, outcome)
    return BatchOutcome(
        outcomes=tuple(ordered),
        by_id=by_id,
        result_bytes=sum(len(o.message.content) for o in ordered),
    )


def run_batch(
    runtime: Runtime,
    proposals: Sequence[Proposal],
    context: CallContext,
    *,
    concurrency: int = 4,
    result_budget: int | None = None,
) -> BatchOutcome:
    """Run one response's calls under R16's rules (sync)."""
    results: dict[int, Outcome] = _duplicates(runtime, proposals, context)
    with concurrent.futures.ThreadPoolExecutor(
        max_workers=max(1, concurrency), thread_name_prefix="toolbound-batch"
    ) as pool:
        for concurrent_group, members in _groups(proposals, context):
            todo = [i for i in members if i not in results]
            if concurrent_group and len(todo) > 1:
                futures = {i: pool.submit(runtime.run, proposals[i], context) for i in todo}
                for i, fut in futures.items():
                    results[i] = fut.result()
            else:
                for i in todo:
                    results[i] = runtime.run(proposals[i], context)
    return _finish(runtime, [results[i] for i in range(len(proposals))], result_budget)


async def arun_batch(
    runtime: Runtime,
    proposals: Sequence[Proposal],
    context: CallContext,
    *,
    concurrency: int = 4,
    result_budget: int | None = None,
) -> BatchOutcome:
    """Run one response's calls under R16's rules (async)."""
    results: dict[int, Outcome] = _duplicates(runtime, proposals, context)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(i: int) -> None:
        async with gate:
            results[i] = await runtime.arun(proposals[i], context)

    for concurrent_group, members in _groups(proposals, context):
        todo = [i for i in members if i not in results]
        if concurrent_group:
            await asyncio.gather(*(one(i) for i in todo))
        else:
            for i in todo:
                results[i] = await runtime.arun(proposals[i], context)
    return _finish(runtime, [results[i] for i in range(len(proposals))], result_budget)
