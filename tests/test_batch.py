"""R16: parallel calls pair by id, reads run together, writes one at a time in order."""

from __future__ import annotations

import asyncio
import threading
import time

from harness import Harness, spec
from toolbound.batch import arun_batch, run_batch
from toolbound.testing import FakeTool, call


class Clocked:
    """A tool that records when it ran, and on which thread."""

    def __init__(self, name: str, log: list, delay: float = 0.1) -> None:
        self.name, self.log, self.delay = name, log, delay

    def __call__(self, args, _ctx):
        start = time.monotonic()
        time.sleep(self.delay)
        self.log.append((self.name, args["text"], start, time.monotonic()))
        return {"text": args["text"]}


def overlaps(a, b) -> bool:
    return a[2] < b[3] and b[2] < a[3]


def test_results_pair_by_id_not_order(harness: Harness):
    """Each outcome is found by its call id, whatever order calls finish in."""
    log: list = []
    harness.registry.register(spec("slow"), Clocked("slow", log, 0.2))
    harness.registry.register(spec("fast"), Clocked("fast", log, 0.0))
    batch = run_batch(
        harness.runtime,
        [call("slow", {"text": "a"}, "c1"), call("fast", {"text": "b"}, "c2")],
        harness.context(),
    )
    assert [o.proposal_id for o in batch.outcomes] == ["c1", "c2"]
    assert batch["c1"].result.value == {"text": "a"}
    assert batch["c2"].result.value == {"text": "b"}
    assert [e[0] for e in log] == ["fast", "slow"]  # finished out of order


def test_reads_run_concurrently_bounded(harness: Harness):
    """Four 0.2 s reads with concurrency 2 take about two rounds, not four."""
    log: list = []
    harness.registry.register(spec(), Clocked("r", log, 0.2))
    t0 = time.monotonic()
    run_batch(
        harness.runtime,
        [call("echo", {"text": str(i)}, f"c{i}") for i in range(4)],
        harness.context(),
        concurrency=2,
    )
    elapsed = time.monotonic() - t0
    assert 0.35 < elapsed < 0.75
    assert max(sum(overlaps(a, b) for b in log if b is not a) for a in log) <= 2


def test_writes_one_at_a_time_in_model_order(harness: Harness):
    """Writes never overlap and run in the order the model listed them."""
    log: list = []
    harness.registry.register(spec("write", effect="reversible_write"), Clocked("w", log, 0.05))
    run_batch(
        harness.runtime,
        [call("write", {"text": str(i)}, f"c{i}") for i in range(4)],
        harness.context(),
        concurrency=4,
    )
    assert [e[1] for e in log] == ["0", "1", "2", "3"]
    assert not any(overlaps(a, b) for a in log for b in log if a is not b)


def test_write_is_a_barrier_for_later_reads(harness: Harness):
    """A read listed after a write starts only when the write has finished."""
    log: list = []
    harness.registry.register(spec("write", effect="reversible_write"), Clocked("w", log, 0.1))
    harness.registry.register(spec(), Clocked("r", log, 0.05))
    run_batch(
        harness.runtime,
        [
            call("echo", {"text": "r1"}, "c1"),
            call("write", {"text": "w"}, "c2"),
            call("echo", {"text": "r2"}, "c3"),
        ],
        harness.context(),
    )
    w = next(e for e in log if e[0] == "w")
    r2 = next(e for e in log if e[1] == "r2")
    r1 = next(e for e in log if e[1] == "r1")
    assert r2[2] >= w[3]
    assert w[2] >= r1[3]


def test_each_call_has_its_own_status(harness: Harness):
    """One call failing does not fail the batch: every call keeps its own outcome."""
    harness.registry.register(spec(), FakeTool(returns={"text": "ok"}))
    batch = run_batch(
        harness.runtime,
        [
            call("echo", {"text": "fine"}, "c1"),
            call("echo", {"text": 5}, "c2"),
            call("nope", {}, "c3"),
        ],
        harness.context(),
    )
    assert [o.kind for o in batch.outcomes] == ["observed", "rejected", "rejected"]
    assert batch["c3"].problem.code == "unknown_tool"


def test_duplicate_call_id_is_refused(harness: Harness):
    """Two calls with one id cannot be paired: the repeat is refused, traced."""
    tool = FakeTool(returns={"text": "ok"})
    harness.registry.register(spec(), tool)
    batch = run_batch(
        harness.runtime,
        [call("echo", {"text": "a"}, "c1"), call("echo", {"text": "b"}, "c1")],
        harness.context(),
    )
    assert batch.outcomes[1].problem.code == "duplicate_call_id"
    assert batch["c1"] is batch.outcomes[0]
    assert tool.calls == [{"text": "a"}]


def test_total_result_budget(harness: Harness):
    """The messages of one batch share a byte budget, spent in the model's order."""
    big = {"items": [f"row-{i:03d}" for i in range(200)]}
    out = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}}},
    }
    harness.registry.register(spec(output_schema=out), FakeTool(returns=big))
    batch = run_batch(
        harness.runtime,
        [call("echo", {"text": str(i)}, f"c{i}") for i in range(3)],
        harness.context(),
        result_budget=3000,
    )
    first, second, third = (o.message for o in batch.outcomes)
    assert not first.truncated
    assert second.truncated
    assert len(first.content) + len(second.content) <= 3000
    # past the budget a call still gets the smallest envelope saying it was cut
    assert third.truncated
    assert len(third.content) <= 256
    handle = batch.outcomes[2].message.payload["continuation"]["handle"]
    assert harness.runtime.continue_result(handle).payload["json_text"].startswith("{")
    sent = batch.outcomes[1].trace.of_kind("tool_message")[-1]
    assert sent.data["content"] == batch.outcomes[1].message.content


def test_async_batch_same_rules(harness: Harness):
    """arun_batch pairs by id and keeps writes ordered too."""
    order: list[str] = []
    lock = threading.Lock()

    async def awrite(args, _ctx):
        await asyncio.sleep(0.01)
        with lock:
            order.append(args["text"])
        return {"text": args["text"]}

    harness.registry.register(spec("write", effect="reversible_write"), awrite)
    batch = asyncio.run(
        arun_batch(
            harness.runtime,
            [call("write", {"text": str(i)}, f"c{i}") for i in range(3)],
            harness.context(),
        )
    )
    assert order == ["0", "1", "2"]
    assert batch["c2"].result.value == {"text": "2"}
