"""Where tools run, and how long the runtime waits for them (R9).

The :class:`Executor` is the only part of the runtime that waits. It runs one attempt
of a tool and reports what happened as a :class:`RawAttempt` — a value, an
exception, a deadline passed, a cancellation, and whether the tool had marked its
commit boundary — without judging it; the runtime classifies the attempt against
the tool's commit boundary.

* Sync tools run on worker threads (:mod:`toolbound.execution.workers`), so a
  deadline can stop *waiting* for them. A Python function cannot be interrupted: an
  overrunning tool keeps its worker until it returns, and what it returns then is
  discarded.
* Async tools run on the caller's event loop (async API) or on the executor's own
  loop thread (sync API), and are cancelled at the deadline.
* Inline tools (quick ``pure``/``read`` functions) run on the caller's thread; their
  deadline is checked when they return.

Deadlines bound real time (``time.monotonic``), whatever clock the trace records.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
import time
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from toolbound.execution.workers import Answer, Job, Workers, answer, on_worker

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Generator
    from datetime import datetime

    from toolbound._errors import Problem
    from toolbound._model import JSONObject
    from toolbound.execution.tool import ToolContext
    from toolbound.registry import RegisteredTool

__all__ = ["Executor", "RawAttempt"]

_T = TypeVar("_T")
_POLL = 0.05  # seconds between looks at a cancel event while a tool runs


@dataclass(slots=True)
class RawAttempt:
    """What happened during one attempt, before it is classified."""

    started_at: datetime
    ended_at: datetime | None = None
    value: object = None
    error: BaseException | None = None
    timed_out: bool = False
    cancelled: bool = False
    caller_cancelled: bool = False
    """The awaiting task itself was cancelled (async API): settle, then re-raise."""
    marked: bool = False
    output_checked: bool = False
    """The result already passed its output contract (inside a transaction)."""
    not_started: Problem | None = None
    """Why the runtime did not invoke the tool at all (fencing, R9): nothing happened."""


class Executor:
    """Worker threads for sync tools and, on demand, a loop thread for async ones."""

    def __init__(self, *, max_workers: int = 8) -> None:
        self._max_workers = max_workers
        self._pool: Workers | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def run(
        self,
        tool: RegisteredTool,
        args: JSONObject,
        tctx: ToolContext,
        raw: RawAttempt,
        *,
        budget: float,
        cancel: threading.Event | None,
    ) -> None:
        """One attempt from a sync caller; fills ``raw``."""
        if tool.inline:
            _run_inline(tool, args, tctx, budget, raw)
        elif tool.is_async:
            coro: Awaitable[object] = tool.function(args, tctx)  # type: ignore[assignment]
            fut: concurrent.futures.Future[object] = asyncio.run_coroutine_threadsafe(
                coro,  # type: ignore[arg-type]
                self._background_loop(),
            )
            _wait_sync(fut, budget, cancel, raw)
        else:
            job = Job(tool.function, (args, tctx))
            self.workers().submit(job)
            _wait_job(job, budget, cancel, raw)
        raw.marked = tctx.committed

    async def arun(
        self,
        tool: RegisteredTool,
        args: JSONObject,
        tctx: ToolContext,
        raw: RawAttempt,
        *,
        budget: float,
        cancel: threading.Event | None,
    ) -> None:
        """One attempt from an async caller; fills ``raw``.

        If the awaiting task is cancelled, ``raw.caller_cancelled`` is set and the
        method returns normally: the caller settles the call, then re-raises.
        """
        if tool.inline:
            _run_inline(tool, args, tctx, budget, raw)
        elif tool.is_async and cancel is None:
            # Nothing to poll: the coroutine runs in the caller's own task, under
            # the deadline, with no Task of its own and no extra trip through the loop.
            try:
                await _await_inline(tool.function(args, tctx), budget, raw)  # type: ignore[arg-type]
            except asyncio.CancelledError:
                raw.cancelled = raw.caller_cancelled = True
        elif not tool.is_async:
            # A sync tool on a worker, its answer handed back to this loop.
            await self._hand_off(tool, args, tctx, raw, budget=budget, cancel=cancel)
        else:
            fut: asyncio.Future[object] = asyncio.ensure_future(
                tool.function(args, tctx)  # type: ignore[arg-type]
            )
            try:
                await _wait_async(fut, budget, cancel, raw)
            except asyncio.CancelledError:
                fut.cancel()
                raw.cancelled = raw.caller_cancelled = True
        raw.marked = tctx.committed

    async def _hand_off(
        self,
        tool: RegisteredTool,
        args: JSONObject,
        tctx: ToolContext,
        raw: RawAttempt,
        *,
        budget: float,
        cancel: threading.Event | None,
    ) -> None:
        """Run a sync tool on a worker and wait for it on this loop, up to ``budget``.

        The worker hands its job back to this loop, where the :class:`Answer` resumes
        this task; the deadline is watched by the loop's one deadline timer, and a
        cancel event, if any, by a poll. When the runtime stops waiting, the tool's
        thread runs on and what it returns then is dropped.
        """
        loop = asyncio.get_running_loop()
        waiter = Answer(loop)
        job = Job(tool.function, (args, tctx), loop=loop, waiter=waiter)
        deadlines = self._deadlines(loop)
        deadlines.add(waiter, budget)
        poll = None if cancel is None else _CancelPoll(loop, waiter, cancel)
        self.workers().submit(job)
        try:
            ended = await waiter
        except asyncio.CancelledError:
            job.dropped = True
            raw.cancelled = raw.caller_cancelled = True
            return
        finally:
            deadlines.discard(waiter)
            if poll is not None:
                poll.stop()
        if ended is None:
            job.dropped = True
            if poll is not None and poll.cancelled:
                raw.cancelled = True
            else:
                raw.timed_out = True
            return
        _take(job, raw)

    def _deadlines(self, loop: asyncio.AbstractEventLoop) -> _Deadlines:
        """The deadline timer of ``loop``, the running loop of this thread."""
        deadlines: _Deadlines | None = getattr(self._local, "deadlines", None)
        if deadlines is None or deadlines.loop is not loop:
            # A thread runs one loop at a time; a call still waiting on an earlier
            # loop keeps that loop's timer, which answers it there.
            deadlines = self._local.deadlines = _Deadlines(loop)
        return deadlines

    async def in_worker(self, fn: Callable[..., _T], *args: object) -> _T:
        """Run a blocking function on one worker thread, from async code."""
        return cast("_T", await on_worker(self.workers(), fn, args))

    def workers(self) -> Workers:
        """The worker threads, started on first use."""
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = Workers(max_workers=self._max_workers, name="toolbound-tool")
                pool = self._pool
        return pool

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            with self._lock:
                if self._loop is None:
                    new = asyncio.new_event_loop()
                    self._loop_thread = threading.Thread(
                        target=new.run_forever, name="toolbound-loop", daemon=True
                    )
                    self._loop_thread.start()
                    self._loop = new
                loop = self._loop
        return loop

    def close(self) -> None:
        """Stop the pool and the loop thread (running tools are not interrupted)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._loop is not None:
            loop, self._loop = self._loop, None
            loop.call_soon_threadsafe(loop.stop)
            if self._loop_thread is not None:
                self._loop_thread.join(timeout=1.0)
                self._loop_thread = None
            if not loop.is_running():
                loop.close()


class _Deadlines:
    """The deadlines of the sync tools one loop is waiting for, behind one timer.

    A timer per call would be a timer handle made, pushed on the loop's heap and
    cancelled for each call — most of them long before they were due. Here one timer
    is armed for the earliest deadline; a call that ends early only leaves the table;
    when the timer fires, every call whose deadline has passed is answered with
    ``None`` (the runtime stops waiting) and the timer is armed for the next one.
    A deadline is never answered late: the timer is always due at or before the
    earliest deadline still waited for. Touched only from its loop's thread.
    """

    __slots__ = ("_handle", "_pending", "_when", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._pending: dict[Answer, float] = {}
        self._handle: asyncio.TimerHandle | None = None
        self._when = math.inf

    def add(self, waiter: Answer, budget: float) -> None:
        """Answer ``waiter`` with ``None`` once ``budget`` seconds have passed."""
        when = self.loop.time() + budget
        self._pending[waiter] = when
        if when < self._when:
            self._arm(when)

    def discard(self, waiter: Answer) -> None:
        """Stop watching ``waiter`` (it was answered, or its caller gave up)."""
        self._pending.pop(waiter, None)

    def _arm(self, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._when = when
        self._handle = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle, self._when = None, math.inf
        now, pending = self.loop.time(), self._pending
        for waiter in [w for w, when in pending.items() if when <= now]:
            del pending[waiter]
            answer(waiter, None)
        if pending:
            self._arm(min(pending.values()))


class _CancelPoll:
    """A look at a call's cancel event every ``_POLL`` seconds, from the loop."""

    __slots__ = ("_cancel", "_handle", "_loop", "_waiter", "cancelled")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        waiter: Answer,
        cancel: threading.Event,
    ) -> None:
        self._loop, self._waiter, self._cancel = loop, waiter, cancel
        self.cancelled = False
        """The cancel event, not the deadline, ended the wait."""
        self._handle = loop.call_later(_POLL, self._look)

    def _look(self) -> None:
        if self._waiter.done():
            return
        if self._cancel.is_set():
            self.cancelled = True
            answer(self._waiter, None)
            return
        self._handle = self._loop.call_later(_POLL, self._look)

    def stop(self) -> None:
        self._handle.cancel()


def _take(job: Job, raw: RawAttempt) -> None:
    """Read a finished job into ``raw`` as if the tool had run on the caller's thread.

    An ``Exception`` is the tool's to be classified; anything else (``SystemExit``,
    ``KeyboardInterrupt``...) goes on up the caller's stack, as an inline tool's would.
    """
    error = job.error
    if error is None:
        raw.value = job.value
    elif isinstance(error, Exception):
        raw.error = error
    else:
        raise error


def _wait_job(job: Job, budget: float, cancel: threading.Event | None, raw: RawAttempt) -> None:
    """Wait on the caller's thread for a sync tool's job, up to ``budget``."""
    if cancel is None:
        if not job.wait(budget):
            job.dropped = raw.timed_out = True
            return
    else:
        end = time.monotonic() + budget
        while not job.wait(min(_POLL, end - time.monotonic())):
            if cancel.is_set():
                job.dropped = raw.cancelled = True
                return
            if time.monotonic() >= end:
                job.dropped = raw.timed_out = True
                return
    _take(job, raw)


def _run_inline(
    tool: RegisteredTool, args: JSONObject, tctx: ToolContext, budget: float, raw: RawAttempt
) -> None:
    t0 = time.monotonic()
    try:
        raw.value = tool.function(args, tctx)
    except Exception as exc:  # noqa: BLE001 - classified by the runtime
        raw.error = exc
    raw.timed_out = time.monotonic() - t0 > budget


def _wait_sync(
    fut: concurrent.futures.Future[object],
    budget: float,
    cancel: threading.Event | None,
    raw: RawAttempt,
) -> None:
    end = time.monotonic() + budget
    try:
        if cancel is None:
            raw.value = fut.result(timeout=budget)
            return
        while True:
            left = end - time.monotonic()
            done, _ = concurrent.futures.wait([fut], timeout=max(0.0, min(_POLL, left)))
            if done:
                raw.value = fut.result()
                return
            if cancel.is_set():
                fut.cancel()
                raw.cancelled = True
                return
            if left <= 0:
                raise TimeoutError  # noqa: TRY301 - joins the deadline path below
    except TimeoutError as exc:
        if fut.done() and not fut.cancelled() and fut.exception() is exc:
            raw.error = exc  # the tool's own timeout, not our deadline
        else:
            fut.cancel()
            raw.timed_out = True
    except Exception as exc:  # noqa: BLE001 - classified by the runtime
        raw.error = exc


async def _await_inline(coro: Awaitable[object], budget: float, raw: RawAttempt) -> None:
    """Await an async tool in the current task under its deadline (no cancel event).

    The same endings as :func:`_wait_async`: the deadline cancels the tool and
    reads as timed out; a CancelledError the tool raises of itself reads as
    cancelled; the caller's own cancellation propagates (after the tool saw it).

    The tool's first step runs at once: one that answers without suspending (a
    cached or computed answer) needs no timer — a timer could not have fired before
    it answered anyway. One that suspends is awaited under the rest of its deadline.
    """
    if not isinstance(coro, types.CoroutineType):
        await _await_timed(coro, budget, raw)
        return
    t0 = time.monotonic()
    try:
        pending = coro.send(None)
    except StopIteration as done:
        raw.value = done.value
        return
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
        raw.cancelled = True
        return
    except Exception as exc:  # noqa: BLE001 - classified by the runtime
        raw.error = exc
        return
    await _await_timed(_resume(coro, pending), budget - (time.monotonic() - t0), raw)


async def _await_timed(coro: Awaitable[object], budget: float, raw: RawAttempt) -> None:
    timer = asyncio.timeout(budget)
    try:
        async with timer:
            raw.value = await coro
    except TimeoutError as exc:
        if timer.expired():
            raw.timed_out = True
        else:
            raw.error = exc
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if timer.expired() or (current is not None and current.cancelling()):
            raise
        raw.cancelled = True
    except Exception as exc:  # noqa: BLE001 - classified by the runtime
        raw.error = exc


@types.coroutine
def _resume(
    coro: Coroutine[object, object, object], pending: object
) -> Generator[object, object, object]:
    """The rest of ``coro``, whose first step yielded ``pending``: ``yield from``, by hand."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - every exception goes to the tool
            try:
                pending = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def _wait_async(  # noqa: C901 - deadline, cancel event and caller cancel
    fut: asyncio.Future[object],
    budget: float,
    cancel: threading.Event | None,
    raw: RawAttempt,
) -> None:
    timer = asyncio.timeout(budget)
    try:
        async with timer:
            if cancel is None:
                raw.value = await fut
                return
            while True:
                done, _ = await asyncio.wait({fut}, timeout=_POLL)
                if done:
                    raw.value = fut.result()
                    return
                if cancel.is_set():
                    fut.cancel()
                    raw.cancelled = True
                    return
    except TimeoutError as exc:
        if timer.expired():
            raw.timed_out = True
        else:
            raw.error = exc
    except asyncio.CancelledError:
        if fut.cancelled() and not timer.expired():
            # Only the tool's own task was cancelled, not ours.
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            raw.cancelled = True
            return
        raise
    except Exception as exc:  # noqa: BLE001 - classified by the runtime
        raw.error = exc
