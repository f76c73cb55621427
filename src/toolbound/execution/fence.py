"""Fencing: an effect starts only while its owner surely holds the call (R9).

A process that pauses — stopped by a debugger or ``SIGSTOP``, swapped out, frozen by
a long garbage collection — keeps running from where it stopped, unaware that time
passed. If it held a call under a lease, another process may have taken the call
over meanwhile (:meth:`~toolbound.ledger.store.Ledger.take_over`), and the paused one
must not then start the tool. So, immediately before each attempt invokes its tool,
the runtime asks :func:`may_start`:

=============================================  ==================================
the attempt's deadline has passed               stop: ``deadline_exceeded``
a write, whose lease lapsed since it began      stop: ``lease_lost``
a write, whose lease ends within ``margin``     stop: ``lease_lost``
otherwise                                       go
=============================================  ==================================

A stopped attempt ends FAILED_BEFORE_COMMIT: the tool was never started. The other
half of the rule is the taker's: a takeover, and a finding of "not committed", wait
until the owner's deadline and lease have both passed
(:func:`~toolbound.ledger.rules.owner_may_act_until`). Between them, no effect can
start on a call once somebody else has taken it.

What no check before the call can cover is a pause *inside* the tool, after it
started: the tool gets the call's epoch (:attr:`ToolContext.epoch
<toolbound.execution.tool.ToolContext.epoch>`) to hand to the system it writes to
(see ``docs/execution.md``).

The lease is the embedding program's: a :class:`Lease` reports for how much longer
this process surely holds the calls it runs.
:class:`RenewedLease` is the one a lease-renewing service keeps. A runtime without a
lease (one process, no takeover but the sweep) checks the deadline alone. No I/O here.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, Protocol

from toolbound._errors import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Go", "Lease", "RenewedLease", "Start", "Stop", "may_start"]


class Lease(Protocol):
    """How long this process surely holds the calls it runs."""

    @property
    def margin(self) -> float:
        """Seconds of lease an effect needs left to start."""
        ...

    def left(self, since: float) -> float:
        """Seconds from now a call held since ``since`` is surely still this process's.

        ``since`` is a reading of the runtime clock's ``monotonic()`` (the lease must
        read the same clock). Zero or less when the lease has run out, or ran out at
        any moment after ``since``: a renewal after a lapse holds new calls, not those
        another process may have taken meanwhile.
        """
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Go:
    """The tool may start."""

    kind: Literal["go"] = "go"


@dataclass(frozen=True, slots=True, kw_only=True)
class Stop:
    """The tool must not start: ``code`` says why (a problem code)."""

    kind: Literal["stop"] = "stop"
    code: Literal["deadline_exceeded", "lease_lost"]
    message: str


Start = Go | Stop

_GO: Final = Go()
"""The answer nearly every attempt gets, built once."""


def may_start(
    *, now: float, deadline: float, lease: Lease | None, since: float | None = None
) -> Start:
    """Whether an attempt may invoke its tool at ``now``.

    ``now``, ``deadline`` (the call's) and ``since`` (when the call began; ``now`` if
    not given) are readings of the runtime's monotonic clock; ``lease`` is ``None``
    when nothing but the deadline bounds the call.
    """
    if now >= deadline:
        return Stop(
            code="deadline_exceeded",
            message="the deadline passed before the tool could start",
        )
    if lease is not None:
        left = lease.left(now if since is None else since)
        if left < lease.margin:
            return Stop(
                code="lease_lost",
                message=(
                    f"this process held the call's lease for {max(left, 0.0):.3f} s more, "
                    f"under the {lease.margin:g} s an effect needs; the tool was not started"
                ),
            )
    return _GO


class RenewedLease:
    """A :class:`Lease` renewed by its owner: held ``seconds`` from each renewal's start.

    Call :meth:`renewing` just before sending a renewal and :meth:`renewed` with what it
    returned once the store has acknowledged it: the lease is then held until
    ``seconds`` after the renewal was *sent*, on ``clock`` (a monotonic clock, the
    runtime's) — never later than the store's own lease, which started when the store
    received it. A renewal that fails leaves the lease where it was, running out. A
    renewal sent after the lease ran out holds the calls begun since, never one begun
    before: another process may have taken it meanwhile. Thread-safe.

    ``margin`` defaults to a third of the lease: renewals every third of the lease
    (as the service makes them) leave at least that much, so only a process that
    missed renewals, or paused, is stopped.
    """

    def __init__(
        self,
        seconds: float,
        *,
        margin: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if seconds <= 0:
            msg = f"a lease must last a positive number of seconds, not {seconds}"
            raise ConfigurationError(msg)
        self.seconds = seconds
        self._margin = seconds / 3 if margin is None else margin
        if not 0 <= self._margin < seconds:
            msg = f"the lease margin must be in [0, {seconds}) seconds, not {self._margin}"
            raise ConfigurationError(msg)
        self._clock = clock
        self._lock = threading.Lock()
        self._since = clock()
        """Since when the lease has been held without a break."""
        self._until = self._since + seconds

    @property
    def margin(self) -> float:
        """Seconds of lease an effect needs left to start."""
        return self._margin

    def renewing(self) -> float:
        """The instant a renewal is being sent: pass it to :meth:`renewed` once it succeeds."""
        return self._clock()

    def renewed(self, sent: float) -> None:
        """A renewal sent at ``sent`` was acknowledged: the lease runs ``seconds`` from it."""
        with self._lock:
            if sent >= self._until:
                self._since = sent  # it had run out: what was held before may be taken
            self._until = max(self._until, sent + self.seconds)

    def left(self, since: float) -> float:
        """See :meth:`Lease.left`."""
        with self._lock:
            if since < self._since:
                return -math.inf
            return self._until - self._clock()
