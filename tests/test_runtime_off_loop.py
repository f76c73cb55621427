"""The Runtime's async API never blocks its caller's loop on the ledger or the journal.

With the loop guard on, the SQLite ledger and journal raise if they are reached from
a thread that runs an event loop; ``arun``, ``aapprove`` and ``aconfirm`` pass here
because what claims a key or records a phase runs on the runtime's I/O pool.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

import pytest

from harness import Harness, grant, proposal, spec
from toolbound._loopguard import set_loop_guard
from toolbound.execution.offload import Offload
from toolbound.journal import SQLiteJournal
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.testing import FakeTool

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from toolbound._clock import FixedClock


@pytest.fixture
def guarded() -> Iterator[None]:
    set_loop_guard(True)
    yield
    set_loop_guard(False)


@pytest.fixture
def durable(tmp_path: Path, clock: FixedClock, guarded: None) -> Iterator[Harness]:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    journal = SQLiteJournal(tmp_path / "journal.db")
    h = Harness(
        clock,
        grant(),
        grant(capability="test:confirm", confirm=True),
        ledger=ledger,
        journal=journal,
        io_threads=2,
    )
    yield h
    h.close()
    ledger.close()
    journal.close()


def test_writes_reads_and_confirmations_run_with_the_loop_guard_on(durable: Harness) -> None:
    """A write claims and commits its key, a read answers, a parked call runs once approved."""
    durable.registry.register(
        spec("write", effect="reversible_write"), FakeTool(returns={"text": "1"})
    )
    durable.registry.register(spec("echo"), FakeTool(returns={"text": "hi"}))
    durable.registry.register(
        spec("guarded", effect="reversible_write", capabilities=("test:confirm",)),
        FakeTool(returns={"text": "ok"}),
    )
    runtime, ctx = durable.runtime, durable.context()

    async def calls() -> tuple[list[str], str]:
        write = await runtime.arun(proposal("write", {"text": "a"}), ctx)
        again = await runtime.arun(proposal("write", {"text": "a"}, "call_2"), ctx)
        read = await runtime.arun(proposal("echo", {"text": "hi"}), ctx)
        parked = await runtime.arun(proposal("guarded", {"text": "b"}), ctx)
        assert parked.kind == "awaiting_confirmation"
        approved = await runtime.aapprove(
            parked.invocation_id, digest=parked.request.digest, approver="ops"
        )
        return [write.kind, again.kind, read.kind, approved.kind], write.invocation_id

    kinds, write_id = asyncio.run(calls())
    assert kinds == ["observed", "observed", "observed", "observed"]
    record = runtime.ledger.find(write_id)
    assert record is not None
    assert record.phase == "committed"
    assert runtime.recorder is not None
    runtime.recorder.flush()
    assert runtime.recorder.failures == 0
    assert runtime.recorder.recorded >= 4


def test_a_step_off_the_loop_finishes_though_its_caller_is_cancelled() -> None:
    """``finish``: the step runs to its end, its result arrives, then the cancellation."""
    pool = Offload(1)
    entered, release = threading.Event(), threading.Event()
    done: list[str] = []
    seen: list[object] = []

    def step() -> str:
        entered.set()
        release.wait(5)
        done.append("claimed")
        return "claimed"

    async def caller() -> None:
        seen.append(await pool.finish(step))
        await asyncio.sleep(0)  # the next await: the cancellation is delivered here
        seen.append("not reached")

    async def main() -> None:
        task = asyncio.ensure_future(caller())
        await asyncio.to_thread(entered.wait, 5)
        task.cancel()
        await asyncio.sleep(0.05)
        assert not task.done()  # waiting for the step, not abandoning it
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(main())
    finally:
        pool.close()
    assert done == ["claimed"]
    assert seen == ["claimed"]


def test_a_runtime_needs_an_io_thread(clock: FixedClock) -> None:
    """A runtime with no I/O thread is refused when built, not a loop that hangs later."""
    with pytest.raises(ValueError, match="at least one I/O thread"):
        Harness(clock, io_threads=0).runtime  # noqa: B018 - building it is the test


def test_off_loop_runs_on_a_thread_without_a_loop(harness: Harness) -> None:
    """``Runtime.off_loop``: the function runs on a pool thread, where no loop runs."""

    def where() -> tuple[str, bool]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return threading.current_thread().name, False
        return threading.current_thread().name, True

    name, loop = asyncio.run(harness.runtime.off_loop(where))
    assert name.startswith("toolbound-runtime-io")
    assert loop is False
