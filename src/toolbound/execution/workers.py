"""The threads that run sync tools off the caller's thread (R9).

A bounded set of worker threads, started as they are needed and then kept, all
waiting on one queue. A :class:`Job` is a function, its arguments and the way its
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
import atexit
import concurrent.futures
import queue
import threading
import weakref
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

__all__ = ["Job", "Workers"]


class Job:
    """One function call handed to a worker, and what came of it."""

    __slots__ = ("args", "done", "dropped", "error", "fn", "loop", "value", "waiter")

    def __init__(
        self,
        fn: Callable[..., object],
        args: tuple[object, ...],
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        waiter: asyncio.Future[Job | None] | None = None,
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


def answer(waiter: asyncio.Future[Job | None], job: Job | None) -> None:
    """Resolve ``waiter`` with ``job`` (its answer) or ``None`` (no answer), if still open.

    Runs on the waiter's loop; the first of the worker, a deadline and a cancel wins.
    """
    if not waiter.done():
        waiter.set_result(job)


class Workers:
    """At most ``max_workers`` threads running jobs from one queue, started on demand."""

    def __init__(self, *, max_workers: int, name: str) -> None:
        """No thread yet: the first :meth:`submit` starts one."""
        if max_workers < 1:
            msg = f"max_workers must be at least 1, not {max_workers}"
            raise ValueError(msg)
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        # One token per worker waiting on the queue: list.append and list.pop are
        # atomic, so handing a job to an idle worker takes no lock.
        self._idle: list[None] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()  # guards starting threads and closing
        self._closed = False
        _LIVE.add(self)
        weakref.finalize(self, _stop, self._queue, self._threads)

    @property
    def threads(self) -> int:
        """How many worker threads have been started (never more than ``max_workers``)."""
        return len(self._threads)

    def submit(self, job: Job) -> None:
        """Queue ``job``; an idle worker takes it, or a new one if there is room."""
        if self._closed:
            job.error = _closed_error()
            _hand_back(job)
            return
        self._queue.put(job)
        try:
            self._idle.pop()
        except IndexError:
            self._start_worker()

    def _start_worker(self) -> None:
        with self._lock:
            if self._closed or len(self._threads) >= self._max:
                return  # the job waits for the next worker to finish
            thread = threading.Thread(
                target=_serve,
                args=(self._queue, self._idle),
                name=f"{self._name}_{len(self._threads)}",
            )
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        """Answer the jobs no worker has started, and let the workers end.

        A job left in the queue is answered with ``CancelledError`` as if its function
        had raised it; a running function is not interrupted: its worker ends after it.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _LIVE.discard(self)
        dropped: list[Job] = []
        while True:
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                dropped.append(job)
        for job in dropped:
            job.error = _closed_error()
            _hand_back(job)
        _stop(self._queue, self._threads)


def _closed_error() -> BaseException:
    # What a closed concurrent.futures pool answers its pending calls with.
    return concurrent.futures.CancelledError("the runtime closed before the tool started")


def _serve(jobs: queue.SimpleQueue[Job | None], idle: list[None]) -> None:
    """A worker's life: take a job, run it, hand it back, say it is idle, again."""
    get = jobs.get
    while True:
        job = get()
        if job is None:
            return
        if not job.dropped:
            try:
                job.value = job.fn(*job.args)
            except BaseException as exc:  # noqa: BLE001 - the caller judges it
                job.error = exc
        # Idle before the hand-back: the caller, once woken, should find this thread
        # about to block, not holding the interpreter.
        idle.append(None)
        _hand_back(job)
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


def _stop(jobs: queue.SimpleQueue[Job | None], threads: list[threading.Thread]) -> None:
    # One end-of-work mark per worker; each takes one and returns.
    for _ in range(len(threads)):
        jobs.put(None)


# Pools still open when the interpreter exits: as concurrent.futures does, their
# workers finish what they run and what is queued before the interpreter goes.
_LIVE: Final[weakref.WeakSet[Workers]] = weakref.WeakSet()


def _at_exit() -> None:
    pools = list(_LIVE)
    for pool in pools:
        _stop(pool._queue, pool._threads)  # noqa: SLF001 - this module's own pools
    for pool in pools:
        for thread in list(pool._threads):  # noqa: SLF001
            thread.join()


# Called before the interpreter joins its non-daemon threads, as concurrent.futures'
# own exit hook is: idle workers must be told to end or the interpreter would wait on them.
getattr(threading, "_register_atexit", atexit.register)(_at_exit)
