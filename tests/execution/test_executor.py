"""The executor's hand-off of sync tools to worker threads (R9).

Each test runs one attempt through a real :class:`Executor` from ``run`` (a sync
caller) and ``arun`` (an async caller) and reads the raw attempt: the value, the
error, the deadline, a cancel, the caller's own cancellation and the commit mark.
Tools that block wait on an event the test releases, so no thread outlives its test.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness import MIRA, proposal, spec
from toolbound import Registry
from toolbound._model import Invocation
from toolbound.execution.executor import Executor, RawAttempt
from toolbound.execution.tool import ToolContext
from toolbound.execution.workers import Answer, Job, Workers, on_worker

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from toolbound.registry import RegisteredTool

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def context(deadline: float = 2.0) -> ToolContext:
    invocation = Invocation(
        invocation_id="inv-1",
        proposal_id="call_1",
        model_call_id=None,
        tool_name="echo",
        tool_version="v1",
        arguments={"text": "x"},
        canonical=b'{"text":"x"}',
        digest="sha256:0",
        subject=MIRA,
        granted_capabilities=frozenset({"test:use"}),
        resources=(),
        idempotency_key=None,
        deadline=NOW + timedelta(seconds=deadline),
        trace_id="0" * 32,
    )
    return ToolContext(
        invocation=invocation, attempt=1, secrets={}, idempotency_key=None, deadline_in=deadline
    )


def registered(function: Callable[..., object]) -> RegisteredTool:
    return Registry().register(spec(), function)  # type: ignore[arg-type]


@pytest.fixture
def executor() -> Iterator[Executor]:
    ex = Executor(max_workers=4)
    yield ex
    ex.close()


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event blocking tools wait on; set when the test ends, so their threads end."""
    event = threading.Event()
    yield event
    event.set()


class Blocking:
    """A tool that says it has started, then waits for the test's release (5 s at most)."""

    def __init__(self, release: threading.Event) -> None:
        self.started = threading.Event()
        self.release = release

    def __call__(self, _args: object, _ctx: object) -> dict[str, str]:
        self.started.set()
        self.release.wait(5)
        return {"text": "late"}


@pytest.fixture(params=["run", "arun"])
def attempt(request: pytest.FixtureRequest, executor: Executor) -> Callable[..., RawAttempt]:
    """One attempt of a tool from a sync caller (``run``) or an async one (``arun``)."""

    def go(
        function: Callable[..., object],
        *,
        budget: float = 2.0,
        cancel: threading.Event | None = None,
        tctx: ToolContext | None = None,
    ) -> RawAttempt:
        tool, raw = registered(function), RawAttempt(started_at=NOW)
        tctx = tctx or context(budget)
        if request.param == "run":
            executor.run(tool, tctx.invocation.arguments, tctx, raw, budget=budget, cancel=cancel)
        else:
            coro = executor.arun(
                tool, tctx.invocation.arguments, tctx, raw, budget=budget, cancel=cancel
            )
            asyncio.run(coro)
        return raw

    return go


def test_a_sync_tool_runs_on_a_worker_and_answers(attempt):
    """The tool's return value comes back; it ran on a worker thread, not the caller's."""
    where: list[str] = []

    def tool(args, _ctx):
        where.append(threading.current_thread().name)
        return {"text": args["text"].upper()}

    raw = attempt(tool)
    assert (raw.value, raw.error, raw.timed_out, raw.cancelled) == (
        {"text": "X"},
        None,
        False,
        False,
    )
    assert where[0].startswith("toolbound-tool_")
    assert where[0] != threading.current_thread().name


def test_an_exception_is_the_tools_to_classify(attempt):
    """What the tool raises is recorded as it is, not as a deadline."""
    boom = LookupError("no such order")

    def tool(_args, _ctx):
        raise boom

    raw = attempt(tool)
    assert raw.error is boom
    assert not raw.timed_out


def test_the_tools_own_timeout_error_is_not_the_deadline(attempt):
    """A TimeoutError the tool raises of itself, well within its deadline, is its error."""

    def tool(_args, _ctx):
        msg = "upstream timed out"
        raise TimeoutError(msg)

    raw = attempt(tool)
    assert isinstance(raw.error, TimeoutError)
    assert not raw.timed_out


class Fatal(BaseException):
    """Not an Exception: no tool error, it goes on up the caller's stack."""


def test_a_base_exception_goes_on_up_the_callers_stack(attempt):
    """SystemExit-like exceptions reach the caller, as from a tool on the caller's thread."""

    def tool(_args, _ctx):
        raise Fatal

    with pytest.raises(Fatal):
        attempt(tool)


def test_the_deadline_answers_the_caller_on_time(attempt, release):
    """An overrunning tool is abandoned at the deadline; the caller is answered then (R9)."""
    t0 = time.monotonic()
    raw = attempt(lambda _a, _c: release.wait(5) and {"text": "late"}, budget=0.2)
    waited = time.monotonic() - t0
    assert raw.timed_out
    assert (raw.value, raw.error, raw.cancelled) == (None, None, False)
    assert 0.19 <= waited < 1.5


def test_what_an_abandoned_tool_returns_later_is_discarded(executor, release):
    """The late answer of a tool past its deadline changes nothing the caller read."""
    finished = threading.Event()

    def tool(_args, _ctx):
        release.wait(5)
        finished.set()
        return {"text": "late"}

    raw = RawAttempt(started_at=NOW)
    tctx = context(0.1)
    executor.run(registered(tool), {"text": "x"}, tctx, raw, budget=0.1, cancel=None)
    release.set()
    assert finished.wait(2)
    time.sleep(0.05)
    assert raw.timed_out
    assert raw.value is None


def test_the_commit_mark_is_read_after_the_attempt(attempt, release):
    """A tool that marked its commit and then overran is reported as marked."""

    def tool(_args, ctx):
        ctx.mark_committed()
        release.wait(5)
        return {"text": "late"}

    raw = attempt(tool, budget=0.2)
    assert raw.timed_out
    assert raw.marked


def test_an_unmarked_attempt_is_not_marked(attempt):
    """No mark, no commit boundary crossed as far as the runtime knows."""
    raw = attempt(lambda _a, _c: {"text": "x"})
    assert not raw.marked


def test_a_cancel_event_stops_the_wait(attempt, release):
    """Setting the call's cancel event while the tool runs ends the wait, cancelled."""
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    t0 = time.monotonic()
    raw = attempt(lambda _a, _c: release.wait(5) and {"text": "late"}, budget=5.0, cancel=cancel)
    assert raw.cancelled
    assert not raw.timed_out
    assert time.monotonic() - t0 < 2.0


def test_the_deadline_holds_while_a_cancel_event_is_watched(attempt, release):
    """With a cancel event that is never set, the deadline still ends the wait."""
    raw = attempt(
        lambda _a, _c: release.wait(5) and {"text": "late"}, budget=0.2, cancel=threading.Event()
    )
    assert raw.timed_out
    assert not raw.cancelled


def test_a_quick_tool_with_a_cancel_event_answers(attempt):
    """A cancel event that is never set does not stand between a tool and its answer."""
    raw = attempt(lambda _a, _c: {"text": "x"}, cancel=threading.Event())
    assert raw.value == {"text": "x"}


def test_cancelling_the_awaiting_task_is_settled_by_the_caller(executor, release):
    """Arun's task cancelled mid-tool: the attempt says so and returns normally (R9)."""
    tool = Blocking(release)
    raw = RawAttempt(started_at=NOW)

    async def main() -> None:
        task = asyncio.create_task(
            executor.arun(registered(tool), {"text": "x"}, context(), raw, budget=5.0, cancel=None)
        )
        await asyncio.to_thread(tool.started.wait, 2)
        task.cancel()
        await task  # arun itself returns: the caller settles, then re-raises

    asyncio.run(main())
    assert raw.cancelled
    assert raw.caller_cancelled
    assert raw.value is None


def test_workers_never_exceed_max_workers(release):
    """However many calls wait at once, at most max_workers threads run tools."""
    ex = Executor(max_workers=2)
    running: set[str] = set()
    lock = threading.Lock()
    peak = 0

    def tool(_args, _ctx):
        nonlocal peak
        with lock:
            running.add(threading.current_thread().name)
            peak = max(peak, len(running))
        time.sleep(0.05)
        with lock:
            running.discard(threading.current_thread().name)
        return {"text": "x"}

    def call() -> RawAttempt:
        raw = RawAttempt(started_at=NOW)
        ex.run(registered(tool), {"text": "x"}, context(), raw, budget=5.0, cancel=None)
        return raw

    try:
        with concurrent.futures.ThreadPoolExecutor(6) as callers:
            raws = list(callers.map(lambda _: call(), range(12)))
        assert all(r.value == {"text": "x"} for r in raws)
        assert peak <= 2
        assert ex.workers().threads <= 2
    finally:
        ex.close()


def test_a_job_still_queued_at_its_deadline_never_runs(release):
    """With every worker busy, a call that times out in the queue leaves no tool behind."""
    ex = Executor(max_workers=1)
    ran: list[str] = []
    try:
        blocker = RawAttempt(started_at=NOW)
        busy = threading.Thread(
            target=ex.run,
            args=(registered(lambda _a, _c: release.wait(5)), {"text": "x"}, context(), blocker),
            kwargs={"budget": 5.0, "cancel": None},
        )
        busy.start()
        time.sleep(0.05)
        queued = RawAttempt(started_at=NOW)
        tool = registered(lambda _a, _c: ran.append("ran"))
        ex.run(tool, {"text": "x"}, context(), queued, budget=0.1, cancel=None)
        assert queued.timed_out
        release.set()
        busy.join(2)
        after = RawAttempt(started_at=NOW)
        ex.run(
            registered(lambda _a, _c: {"text": "y"}),
            {"text": "x"},
            context(),
            after,
            budget=2.0,
            cancel=None,
        )
        assert after.value == {"text": "y"}
        assert ran == []
    finally:
        ex.close()


def test_close_answers_queued_calls_and_lets_running_tools_finish(release):
    """Runtime.close: a queued call is answered at once; a running tool is not interrupted."""
    ex = Executor(max_workers=1)
    finished = threading.Event()

    def slow(_args, _ctx):
        release.wait(5)
        finished.set()
        return {"text": "x"}

    running, queued = RawAttempt(started_at=NOW), RawAttempt(started_at=NOW)
    first = threading.Thread(
        target=ex.run,
        args=(registered(slow), {"text": "x"}, context(), running),
        kwargs={"budget": 5.0, "cancel": None},
    )
    first.start()
    time.sleep(0.05)
    second = threading.Thread(
        target=ex.run,
        args=(registered(lambda _a, _c: {"text": "never"}), {"text": "x"}, context(), queued),
        kwargs={"budget": 5.0, "cancel": None},
    )
    second.start()
    time.sleep(0.05)
    t0 = time.monotonic()
    ex.close()
    second.join(2)
    assert time.monotonic() - t0 < 1.0
    assert isinstance(queued.error, concurrent.futures.CancelledError)
    assert not finished.is_set()
    release.set()
    first.join(2)
    assert running.value == {"text": "x"}


def test_a_closed_executor_starts_afresh(executor):
    """After close, the next call starts new workers."""
    raw = RawAttempt(started_at=NOW)
    executor.close()
    executor.run(
        registered(lambda _a, _c: {"text": "x"}),
        {"text": "x"},
        context(),
        raw,
        budget=2.0,
        cancel=None,
    )
    assert raw.value == {"text": "x"}


def test_in_worker_returns_and_raises_as_the_function(executor):
    """in_worker is the function, off the loop: its value, or its exception."""

    def fails() -> None:
        msg = "broken"
        raise ValueError(msg)

    async def main() -> tuple[str, str]:
        name = await executor.in_worker(lambda: threading.current_thread().name)
        with pytest.raises(ValueError, match="broken"):
            await executor.in_worker(fails)
        return name, threading.current_thread().name

    worker, caller = asyncio.run(main())
    assert worker.startswith("toolbound-tool_")
    assert worker != caller


def test_a_worker_survives_a_loop_that_closed_while_its_tool_ran(executor, release):
    """The loop waiting for a tool may be gone when it answers; the worker lives on."""
    raw = RawAttempt(started_at=NOW)

    async def main() -> None:
        await executor.arun(
            registered(Blocking(release)), {"text": "x"}, context(), raw, budget=0.2, cancel=None
        )

    asyncio.run(main())  # the deadline answers, then asyncio.run closes the loop
    assert raw.timed_out
    release.set()
    after = RawAttempt(started_at=NOW)
    executor.run(
        registered(lambda _a, _c: {"text": "y"}),
        {"text": "x"},
        context(),
        after,
        budget=2.0,
        cancel=None,
    )
    assert after.value == {"text": "y"}


def test_a_job_for_a_loop_is_awaited_not_waited_for():
    """Waiting on the thread for a job answered on a loop is a mistake, said clearly."""
    loop = asyncio.new_event_loop()
    try:
        job = Job(lambda: None, (), loop=loop, waiter=loop.create_future())
        with pytest.raises(RuntimeError, match="awaited"):
            job.wait(0.1)
    finally:
        loop.close()


def test_workers_need_at_least_one_thread():
    """max_workers below one is refused."""
    with pytest.raises(ValueError, match="at least 1"):
        Workers(max_workers=0, name="none")


def test_calls_one_after_another_reuse_one_worker(executor):
    """A worker that has answered waits for the next call: no thread per call."""
    for _ in range(5):
        raw = RawAttempt(started_at=NOW)
        executor.run(
            registered(lambda _a, _c: {"text": "x"}),
            {"text": "x"},
            context(),
            raw,
            budget=2.0,
            cancel=None,
        )
        assert raw.value == {"text": "x"}
    assert executor.workers().threads == 1


def test_each_of_many_waiting_calls_ends_at_its_own_deadline(release):
    """Calls waiting on one loop: a later call with an earlier deadline is not held up."""
    executor = Executor(max_workers=8)  # room for every blocked tool of both rounds

    def slow(_args, _ctx):
        release.wait(5)
        return {"text": "late"}

    async def timed(budget: float, delay: float = 0.0) -> tuple[RawAttempt, float]:
        await asyncio.sleep(delay)
        raw = RawAttempt(started_at=NOW)
        t0 = time.monotonic()
        await executor.arun(
            registered(slow), {"text": "x"}, context(), raw, budget=budget, cancel=None
        )
        return raw, time.monotonic() - t0

    async def quick() -> RawAttempt:
        raw = RawAttempt(started_at=NOW)
        await executor.arun(
            registered(lambda _a, _c: {"text": "q"}),
            {"text": "x"},
            context(),
            raw,
            budget=5.0,
            cancel=None,
        )
        return raw

    async def main() -> list[tuple[RawAttempt, float]]:
        # The longest deadline is armed first; the shorter ones come after it.
        waits = asyncio.gather(timed(1.2), timed(0.3, delay=0.05), timed(0.6, delay=0.02))
        await asyncio.sleep(0.1)
        answered = await quick()  # a call that ends early leaves the others' deadlines be
        assert answered.value == {"text": "q"}
        return list(await waits)

    try:
        for _ in range(2):  # a second loop on the same thread keeps its own deadlines
            ended = asyncio.run(main())
            for (raw, waited), budget in zip(ended, (1.2, 0.3, 0.6), strict=True):
                assert raw.timed_out
                assert budget - 0.01 <= waited < budget + 0.5
    finally:
        executor.close()


FDS = Path("/proc/self/fd")


def _open_fds() -> int:
    return len(list(FDS.iterdir()))


@pytest.mark.skipif(not FDS.is_dir(), reason="needs /proc")
def test_closed_executors_leave_no_descriptor_behind():
    """Each pool's doorbell is closed once its executor is closed and let go."""
    before = _open_fds()
    for _ in range(50):
        ex = Executor(max_workers=2)
        raw = RawAttempt(started_at=NOW)
        ex.run(
            registered(lambda _a, _c: {"text": "x"}),
            {"text": "x"},
            context(),
            raw,
            budget=2.0,
            cancel=None,
        )
        ex.close()
    deadline = time.monotonic() + 5
    while _open_fds() > before + 2 and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert _open_fds() <= before + 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_runs_tools_on_its_own_workers(executor):
    """After fork the child starts workers of its own and leaves the parent's alone."""
    tool = registered(lambda _a, _c: {"text": str(os.getpid())})

    def call() -> object:
        raw = RawAttempt(started_at=NOW)
        executor.run(tool, {"text": "x"}, context(), raw, budget=2.0, cancel=None)
        return raw.value

    assert call() == {"text": str(os.getpid())}  # the parent's workers are running
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a threaded process
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status
        os._exit(0 if call() == {"text": str(os.getpid())} else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert call() == {"text": str(os.getpid())}


def test_the_interpreter_waits_for_a_running_tool_at_exit(tmp_path):
    """A tool abandoned at its deadline still runs to its end before the process exits."""
    script = tmp_path / "exits.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from datetime import UTC, datetime
            from toolbound.execution.executor import Executor, RawAttempt
            from toolbound.registry import Registry
            sys.path.insert(0, sys.argv[1])
            from harness import spec

            def slow(_args, _ctx):
                time.sleep(0.3)
                print("finished", flush=True)
                return {"text": "late"}

            class Context:  # all the executor reads of a tool context
                committed = False

            ex = Executor()
            raw = RawAttempt(started_at=datetime.now(UTC))
            tool = Registry().register(spec(), slow)
            ex.run(tool, {"text": "x"}, Context(), raw, budget=0.05, cancel=None)
            print("timed out" if raw.timed_out else "answered", flush=True)
            """
        )
    )
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, str(script), tests],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["timed", "out", "finished"]


def test_a_cancel_message_reaches_the_caller_of_in_worker(executor, release):
    """Cancelling the task awaiting in_worker raises CancelledError with its message."""
    started = threading.Event()

    def blocks() -> None:
        started.set()
        release.wait(5)

    async def main() -> None:
        task = asyncio.create_task(executor.in_worker(blocks))
        await asyncio.to_thread(started.wait, 2)
        task.cancel("enough")
        with pytest.raises(asyncio.CancelledError, match="enough"):
            await task

    asyncio.run(main())


def test_an_answer_given_inside_a_task_resumes_its_waiter_on_the_next_turn():
    """Resolved from a running task, an Answer schedules its waiter; no task runs inside another."""
    order: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        waiter = Answer(loop)

        async def waits() -> None:
            await waiter
            order.append("resumed")

        task = asyncio.create_task(waits())
        await asyncio.sleep(0)  # the waiter is now suspended on it
        waiter.resolve(None)
        order.append("resolved")
        await asyncio.wait_for(task, 2)

    asyncio.run(main())
    assert order == ["resolved", "resumed"]


def test_an_answer_given_by_a_loop_callback_resumes_its_waiter_there():
    """Resolved by a callback of its own (the worker's, a timer's), the waiter resumes in it."""
    order: list[str] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        waiter = Answer(loop)

        def hand_back() -> None:
            waiter.resolve(None)
            order.append("callback ends")

        async def waits() -> None:
            assert await waiter is None
            order.append("resumed")

        task = asyncio.create_task(waits())
        await asyncio.sleep(0)
        loop.call_soon(hand_back)
        await asyncio.wait_for(task, 2)
        assert waiter.done()
        assert not waiter.cancelled()

    asyncio.run(main())
    assert order == ["resumed", "callback ends"]


def test_an_answer_cannot_be_read_before_it_is_given():
    """Reading a pending Answer is a mistake; a cancelled one raises CancelledError."""
    loop = asyncio.new_event_loop()
    try:
        waiter = Answer(loop)
        with pytest.raises(asyncio.InvalidStateError):
            waiter.result()
        assert waiter.cancel("gone")
        assert not waiter.cancel()
        with pytest.raises(asyncio.CancelledError, match="gone"):
            waiter.result()
        waiter.resolve(None)  # too late: the first ending stands
        assert waiter.cancelled()
    finally:
        loop.close()


def test_the_callers_own_timeout_ends_a_pooled_call(harness):
    """Arun under asyncio.timeout: the call is settled and the caller's timeout fires."""
    tool_release = threading.Event()

    def slow(_args, _ctx):
        tool_release.wait(5)
        return {"text": "late"}

    harness.registry.register(spec(), slow)

    async def main() -> None:
        async with asyncio.timeout(0.1):
            await harness.runtime.arun(proposal("echo", {"text": "x"}), harness.context())

    t0 = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            asyncio.run(main())
    finally:
        tool_release.set()
    assert time.monotonic() - t0 < 1.5


def test_the_worker_idle_the_shortest_time_takes_the_next_job():
    """After a burst has started many workers, calls one at a time keep to one thread.

    Each idle worker waits on a doorbell of its own and the last to finish is woken
    first: its memory is the warmest, and the others sleep on instead of each being
    woken in turn (or all at once) for a job only one of them takes.
    """
    workers = Workers(max_workers=8, name="test-lifo")
    held = threading.Barrier(9)

    def wait_for_all() -> str:
        held.wait(10)
        return threading.current_thread().name

    def name() -> str:
        return threading.current_thread().name

    def run(fn: Callable[[], str]) -> Job:
        job = Job(fn, ())
        workers.submit(job)
        return job

    try:
        burst = [run(wait_for_all) for _ in range(8)]
        held.wait(10)  # eight workers at once: the pool has grown to eight threads
        assert all(job.wait(10) for job in burst)
        assert len({job.value for job in burst}) == 8
        time.sleep(0.05)  # every worker back at its doorbell
        alone = []
        for _ in range(50):
            job = run(name)
            assert job.wait(10)
            alone.append(job.value)
        assert len(set(alone)) == 1
    finally:
        workers.close()


def test_jobs_from_many_threads_and_loops_are_each_answered_once():
    """Calls made at once from sync callers and from event loops: each answered, once."""
    workers = Workers(max_workers=3, name="test-many")
    answered: list[int] = []
    lock = threading.Lock()

    def note(n: int) -> int:
        with lock:
            answered.append(n)
        return n

    def sync_caller(base: int) -> list[object]:
        jobs = []
        for n in range(base, base + 300):
            job = Job(note, (n,))
            workers.submit(job)
            jobs.append(job)
        assert all(job.wait(10) for job in jobs)
        return [job.value for job in jobs]

    def loop_caller(base: int) -> list[object]:
        async def main() -> list[object]:
            return list(
                await asyncio.gather(
                    *(on_worker(workers, note, (n,)) for n in range(base, base + 300))
                )
            )

        return asyncio.run(main())

    try:
        with concurrent.futures.ThreadPoolExecutor(6) as callers:
            futures = [callers.submit(sync_caller, b * 1000) for b in range(3)]
            futures += [callers.submit(loop_caller, b * 1000) for b in range(3, 6)]
            results = [f.result(timeout=60) for f in futures]
        for b, values in enumerate(results):
            assert values == list(range(b * 1000, b * 1000 + 300))
        assert sorted(answered) == sorted(
            n for b in range(6) for n in range(b * 1000, b * 1000 + 300)
        )
        assert workers.threads <= 3
    finally:
        workers.close()
