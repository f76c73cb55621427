"""The threads that run sync tools off the caller's thread (R9).

A bounded set of worker threads, started as they are needed and then kept, taking
jobs from one queue; an idle one waits on a doorbell of its own, and the one idle the
shortest time is woken first. A :class:`Job` is a function, its arguments and the way its
caller wants to hear the answer:

* a sync caller waits on the job's lock, which the worker releases when the
  function has returned (or raised) — the caller's deadline is that wait's timeout;
* an async caller is woken on its own loop: the worker hands the job back with
  ``loop.call_soon_threadsafe``, which resolves the caller's bare future.

This is the hop ``concurrent.futures`` makes with a ``Future``, a ``Condition``, a
work item and an idle semaphore per call, and ``asyncio`` with a second future
chained to the first; here it is one small object and one lock or one loop callback.

A caller that stops waiting (its deadline passed, it was cancelled) *drops* the
job: a worker that has not started it yet skips it; one that has lets the function
run to its end — a Python function cannot be interrupted — and nobody reads what it
returns.
"""

from __future__ import annotations

import _thread
import asyncio
import atexit
import collections
import concurrent.futures
import functools
import os
import threading
import weakref
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import contextvars
    from collections.abc import Callable, Generator

__all__ = ["Answer", "Job", "Workers", "on_worker"]


class Job:
    """One function call handed to a worker, and what came of it."""

    __slots__ = ("args", "done", "dropped", "error", "fn", "loop", "value", "waiter")

    def __init__(
        self,
        fn: Callable[..., object],
        args: tuple[object, ...],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        waiter: Answer | None = None,
    ) -> None:
        """A job answered on ``waiter`` in ``loop`` if given, else through :attr:`done`."""
        self.fn = fn
        self.args = args
        self.value: object = None
        self.error: BaseException | None = None
        self.dropped = False
        """The caller stopped waiting: a job not started yet is skipped."""
        self.loop = loop
        self.waiter = waiter
        self.done: _thread.LockType | None = None
        if loop is None:
            self.done = _thread.allocate_lock()
            self.done.acquire()  # released by the worker once the function has ended

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a sync caller's job; whether it ended."""
        done = self.done
        if done is None:
            msg = "a job answered on a loop is awaited, not waited for"
            raise RuntimeError(msg)
        return done.acquire(timeout=min(max(timeout, 0.0), threading.TIMEOUT_MAX))


_PENDING, _DONE, _CANCELLED = 0, 1, 2


class Answer:
    """What an async caller awaits for its job, resolved on the caller's loop.

    asyncio's Task awaits it as it awaits a Future (``_asyncio_future_blocking``,
    ``get_loop``, ``add_done_callback``, ``cancel``, ``result``), with one difference,
    which is its reason to be: resolved in a loop callback of its own — the worker's
    hand-back, a deadline timer — it resumes the waiting task in that same callback,
    where a Future would schedule the resumption for the loop's next turn. Resolved
    while a task runs, or cancelled, it schedules the resumption as a Future does.
    Used only from its loop's thread.
    """

    __slots__ = (
        "_asyncio_future_blocking",
        "_callbacks",
        "_loop",
        "_message",
        "_state",
        "_value",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pending, on ``loop``."""
        self._loop = loop
        self._asyncio_future_blocking = False
        self._callbacks: list[tuple[Callable[[Answer], object], contextvars.Context | None]] = []
        self._state = _PENDING
        self._value: Job | None = None
        self._message: object = None

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The loop it is resolved on."""
        return self._loop

    def done(self) -> bool:
        """Whether it was resolved or cancelled."""
        return self._state != _PENDING

    def cancelled(self) -> bool:
        """Whether it was cancelled."""
        return self._state == _CANCELLED

    def result(self) -> Job | None:
        """The job (answered), ``None`` (the caller stopped waiting), or CancelledError."""
        if self._state == _DONE:
            return self._value
        if self._state == _CANCELLED:
            raise asyncio.CancelledError(*(() if self._message is None else (self._message,)))
        msg = "not answered yet"
        raise asyncio.InvalidStateError(msg)

    def add_done_callback(
        self, fn: Callable[[Answer], object], *, context: contextvars.Context | None = None
    ) -> None:
        """Call ``fn(self)`` once it is done (at once, on the loop, if it is)."""
        if self._state == _PENDING:
            self._callbacks.append((fn, context))
        else:
            self._loop.call_soon(fn, self, context=context)

    def remove_done_callback(self, fn: Callable[[Answer], object]) -> int:
        """Forget ``fn``; how many times it was registered."""
        kept = [entry for entry in self._callbacks if entry[0] != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def resolve(self, value: Job | None) -> None:
        """Answer with ``value`` if still pending: the first of worker, deadline and cancel wins."""
        if self._state != _PENDING:
            return
        self._state, self._value = _DONE, value
        callbacks, self._callbacks = self._callbacks, []
        if asyncio.current_task(self._loop) is None:
            # A callback of its own: resume the waiting task now, in its own context.
            for fn, context in callbacks:
                if context is None:
                    fn(self)
                else:
                    context.run(fn, self)
        else:
            for fn, context in callbacks:
                self._loop.call_soon(fn, self, context=context)

    def cancel(self, msg: object = None) -> bool:
        """Cancel it if pending (its task was cancelled); the task resumes on the next turn."""
        if self._state != _PENDING:
            return False
        self._state, self._message = _CANCELLED, msg
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)
        return True

    def __await__(self) -> Generator[Answer, None, Job | None]:
        """Suspend the awaiting task until it is done; then its result."""
        if self._state == _PENDING:
            self._asyncio_future_blocking = True
            yield self
        return self.result()


def answer(waiter: Answer, job: Job | None) -> None:
    """Resolve ``waiter`` with ``job`` (its answer) or ``None`` (no answer), if still open.

    Runs on the waiter's loop; the first of the worker, a deadline and a cancel wins.
    """
    waiter.resolve(job)


class _Doorbell:
    """A worker's own doorbell: rung to wake that worker, and only it.

    Ringing is a system call made with the interpreter lock released, so the worker it
    wakes can take that lock at once, instead of waking, finding it held, and sleeping
    again until the caller lets go of it to wait for the answer. An ``eventfd`` where
    there is one (Linux), else a pipe. Rings that come while the worker is awake are
    kept: it finds the next wait answered at once, looks at the queue, and waits again.
    Its descriptors close when it is collected: nobody can ring it after that.
    """

    __slots__ = ("__weakref__", "ring", "wait")

    def __init__(self) -> None:
        if hasattr(os, "eventfd"):
            fd = os.eventfd(0, os.EFD_CLOEXEC)
            fds: tuple[int, ...] = (fd,)
            self.ring: Callable[[], object] = functools.partial(os.eventfd_write, fd, 1)
            self.wait: Callable[[], object] = functools.partial(os.eventfd_read, fd)
        else:  # pragma: no cover - platforms without eventfd
            read, write = os.pipe()
            fds = (read, write)
            self.ring = functools.partial(os.write, write, b"\0")
            self.wait = functools.partial(os.read, read, 4096)
        weakref.finalize(self, _close_all, fds)


def _close_all(fds: tuple[int, ...]) -> None:
    for fd in fds:
        os.close(fd)


class _Line:
    """What a pool's workers share: the queued jobs and the idle workers' doorbells."""

    __slots__ = ("closed", "idle", "jobs", "lock", "threads")

    def __init__(self) -> None:
        self.jobs: collections.deque[Job | None] = collections.deque()
        # The doorbells of the workers waiting for a job, the last to finish on top:
        # list.append and list.pop are atomic, so waking one takes no lock, and the
        # worker woken is the one whose memory is warmest. One shared doorbell would
        # wake whichever waiter the kernel chooses, round the whole pool in turn.
        self.idle: list[_Doorbell] = []
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()  # guards starting workers and closing
        self.closed = False

    def wake(self) -> bool:
        """Ring the doorbell of the worker idle the shortest time; False if none is idle."""
        try:
            bell = self.idle.pop()
        except IndexError:
            return False
        bell.ring()
        return True

    def stop(self) -> None:
        """Refuse new jobs, and queue one end-of-work mark per worker (once)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            marks = len(self.threads)
        self.jobs.extend([None] * marks)
        while self.wake():
            pass


class Workers:
    """At most ``max_workers`` threads running jobs in order, started on demand."""

    def __init__(self, *, max_workers: int, name: str) -> None:
        """No thread yet: the first :meth:`submit` starts one."""
        if max_workers < 1:
            msg = f"max_workers must be at least 1, not {max_workers}"
            raise ValueError(msg)
        self._max = max_workers
        self._name = name
        self._line = _Line()
        _LIVE.add(self)
        weakref.finalize(self, self._line.stop)

    @property
    def threads(self) -> int:
        """How many worker threads have been started (never more than ``max_workers``)."""
        return len(self._line.threads)

    def submit(self, job: Job) -> None:
        """Queue ``job``; an idle worker takes it, or a new one if there is room."""
        line = self._line
        if line.closed:
            _refuse(job)
            return
        # Queued before the ring: a worker woken by it always finds a job. With no
        # worker idle and no room for another, a busy one takes it when it is done.
        line.jobs.append(job)
        if not line.wake():
            self._start_worker()
        if line.closed:  # closed meanwhile: answer the job unless a worker has taken it
            try:
                line.jobs.remove(job)
            except ValueError:
                return
            _refuse(job)

    def _start_worker(self) -> None:
        line = self._line
        with line.lock:
            if line.closed or len(line.threads) >= self._max:
                return  # the job waits for the next worker to finish
            thread = threading.Thread(
                target=_serve, args=(line,), name=f"{self._name}_{len(line.threads)}"
            )
            line.threads.append(thread)
        thread.start()

    def close(self) -> None:
        """Answer the jobs no worker has started, and let the workers end.

        A job left in the queue is answered with ``CancelledError`` as if its function
        had raised it; a running function is not interrupted: its worker ends after it.
        """
        line = self._line
        _LIVE.discard(self)
        line.stop()
        for job in _take_jobs(line.jobs):
            _refuse(job)

    def join(self) -> None:
        """Wait for every worker to end (after :meth:`close`), except the calling thread."""
        current = threading.current_thread()
        for thread in list(self._line.threads):
            if thread is not current:
                thread.join()

    def _after_fork(self) -> None:
        # The child has none of the parent's threads, and must not ring its doorbell.
        self._line = _Line()
        weakref.finalize(self, self._line.stop)


async def on_worker(
    workers: Workers, fn: Callable[..., object], args: tuple[object, ...]
) -> object:
    """``fn(*args)`` on one of ``workers``' threads, awaited from the running loop.

    Cancelled while it waits, the caller drops the job: skipped if no thread has
    started it, else left to end with nobody reading what it returns.
    """
    loop = asyncio.get_running_loop()
    waiter = Answer(loop)
    job = Job(fn, args, loop=loop, waiter=waiter)
    workers.submit(job)
    try:
        await waiter
    except asyncio.CancelledError:
        job.dropped = True
        raise
    if job.error is not None:
        raise job.error
    return job.value


def _take_jobs(jobs: collections.deque[Job | None]) -> list[Job]:
    """Every job still queued, leaving the end-of-work marks in place."""
    taken = [job for job in list(jobs) if job is not None]
    kept: list[Job] = []
    for job in taken:
        try:
            jobs.remove(job)
        except ValueError:
            continue  # a worker took it first
        kept.append(job)
    return kept


def _refuse(job: Job) -> None:
    # What a closed concurrent.futures pool answers its pending calls with.
    job.error = concurrent.futures.CancelledError("the runtime closed before the tool started")
    _hand_back(job)


def _serve(line: _Line) -> None:
    """A worker's life: take a job, run it, hand it back; when none waits, wait for one."""
    bell = _Doorbell()
    jobs, idle = line.jobs, line.idle
    finished: Job | None = None  # run, not handed back yet
    while True:
        try:
            job = jobs.popleft()
        except IndexError:
            # Idle before the hand-back: the caller, once woken, should find this
            # thread about to wait for its bell, not holding the interpreter.
            idle.append(bell)
            if finished is not None:
                _hand_back(finished)
                finished = None
            if jobs:
                # Queued after the look above and before this worker was listed idle:
                # take it, unless a caller took the bell already (then its ring comes).
                try:
                    idle.remove(bell)
                except ValueError:
                    bell.wait()
                continue
            bell.wait()
            continue
        if finished is not None:
            _hand_back(finished)  # the last answer goes before the next job runs
            finished = None
        if job is None:
            return
        if not job.dropped:  # a job dropped before it started is skipped
            try:
                job.value = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 - the caller judges it
                job.error = exc
            finished = job
        del job  # hold no arguments or result while waiting


def _hand_back(job: Job) -> None:
    loop, waiter, done = job.loop, job.waiter, job.done
    if loop is not None and waiter is not None:
        # contextlib.suppress would cost a context manager on every hand-back.
        try:  # noqa: SIM105
            loop.call_soon_threadsafe(answer, waiter, job)
        except RuntimeError:
            pass  # the loop closed while the job ran: nobody is waiting for it
    elif done is not None:
        done.release()


# Pools still open when the interpreter exits: as concurrent.futures does, their
# workers finish what they run and what is queued before the interpreter goes.
_LIVE: Final[weakref.WeakSet[Workers]] = weakref.WeakSet()


def _at_exit() -> None:
    lines = [pool._line for pool in list(_LIVE)]  # noqa: SLF001 - this module's own pools
    for line in lines:
        line.stop()
    for line in lines:
        for thread in list(line.threads):
            thread.join()


def _after_fork_in_child() -> None:
    for pool in list(_LIVE):
        pool._after_fork()  # noqa: SLF001 - this module's own pools


# Called before the interpreter joins its non-daemon threads, as concurrent.futures'
# own exit hook is: idle workers must be told to end or the interpreter would wait on them.
getattr(threading, "_register_atexit", atexit.register)(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
