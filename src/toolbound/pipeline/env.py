"""What every stage reads: the runtime's collaborators, fixed when it is built.

The stages are functions over a call's typestate (:mod:`.call`) and this one value;
none of them keeps state of its own. What does change across calls lives in exactly
two places the environment points to: the :class:`~.confirm.ConfirmationDesk`
(parked calls) and the :class:`KeptResults` (pages of truncated results).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import timedelta

    from toolbound._clock import Clock
    from toolbound._model import JSONValue
    from toolbound.execution.executor import Executor
    from toolbound.execution.fence import Lease
    from toolbound.execution.offload import Offload
    from toolbound.execution.retry import RetryPolicy, Sleeper
    from toolbound.execution.tool import SecretProvider
    from toolbound.gates.authorize import Policy
    from toolbound.gates.parse import ParseLimits
    from toolbound.ledger.store import Ledger
    from toolbound.registry import RegisteredTool
    from toolbound.results.redact import Redactor
    from toolbound.trace import TraceSink

__all__ = ["Env", "Kept", "KeptResults"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Env:
    """The runtime's collaborators, as the stages see them."""

    policy: Policy
    ledger: Ledger
    clock: Clock
    secrets: SecretProvider | None
    limits: ParseLimits
    redactor: Redactor
    sinks: tuple[TraceSink, ...]
    confirmation_ttl: timedelta
    executor: Executor
    retry_policy: RetryPolicy | None
    sleeper: Sleeper
    rng: Callable[[], float]
    kept: KeptResults
    offload: Offload
    """Where the async API's ledger and journal work runs, off the caller's loop."""
    lease: Lease | None = None
    """How long this process surely holds the writes it runs; ``None``: no lease."""

    def injected(self, tool: RegisteredTool) -> Mapping[str, str]:
        """The credentials ``tool`` is given, so they can be cut from what it returns."""
        if not tool.spec.secrets or self.secrets is None:
            return {}
        out: dict[str, str] = {}
        for name in tool.spec.secrets:
            try:
                out[name] = self.secrets.get(name)
            except KeyError:
                continue
        return out


@dataclass(frozen=True, slots=True)
class Kept:
    """A truncated result, kept so the model can page through the rest (R11)."""

    tool: str
    proposal_id: str
    value: JSONValue = field(repr=False)


class KeptResults:
    """The most recent ``capacity`` truncated results, by invocation id."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, Kept] = OrderedDict()

    def keep(self, invocation_id: str, kept: Kept) -> None:
        """Keep ``kept``, forgetting the oldest beyond the capacity."""
        with self._lock:
            self._kept[invocation_id] = kept
            while len(self._kept) > self._capacity:
                self._kept.popitem(last=False)

    def get(self, invocation_id: str) -> Kept | None:
        """The kept result of ``invocation_id``, if it is still kept."""
        with self._lock:
            return self._kept.get(invocation_id)
