"""The world a case runs in: the kit's own tools, which record every effect.

A runtime under test registers :class:`KitTool` objects as its tools' implementations.
Each call is recorded twice: when the tool is *entered* (the runtime let it run) and
when its *effect* happens (for a read, the read; for a write, the write). Records are
attributed to the call the runner is driving when the tool is entered, so an effect
that lands late (after a timeout or a cancel) still counts against its call. When one
step carries several calls (a turn, a loop), each entry is attributed to the first
pending call of that tool whose arguments it received, in the model's order.

Faults make a tool misbehave the way real ones do:

``raise_after_effect``    the effect happens, then the response is lost (:class:`ResponseLost`)
``hang_after_effect``     the effect happens, then the tool hangs well past its timeout
``refuse_before_effect``  the tool refuses before any effect (:class:`Refusal`)
``slow_before_effect``    the tool takes its time before the effect (room for a cancel)
``inject_instruction``    the result's text fields carry an injected instruction
``unexpected_field``      the result carries an extra ``instruction`` field
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from tool_runtime_conformance.cases import Case, SetFault, ToolDef

__all__ = ["KitTool", "Record", "Refusal", "ResponseLost", "World"]

HANG_PAST_TIMEOUT = 0.5
"""How long past its own timeout a hanging tool keeps the call (seconds)."""
SLOW_BEFORE_EFFECT = 0.4
"""How long a slow tool waits before its effect (seconds)."""
SETTLE_LIMIT = 5.0
"""How long the runner waits for tools still running after the last step (seconds)."""


class ResponseLost(ConnectionError):  # noqa: N818 - what happened, as the caller sees it
    """The effect happened, but its response never arrived."""


class Refusal(Exception):  # noqa: N818 - the tool's own word: it refused
    """The far side refused before doing anything; nothing changed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One thing a kit tool did, for one call."""

    call_id: str
    tool: str
    what: Literal["entered", "effect"]
    arguments: Mapping[str, object]


class World:
    """The tools of one case, their faults and the record of what they did."""

    def __init__(self, case: Case) -> None:
        self.records: list[Record] = []
        self.current_call = ""
        self._faults: dict[str, SetFault] = {}
        self._running = 0
        self._writing = 0
        self.most_writes_at_once = 0
        """The most write calls that were inside their tools at the same moment (R16)."""
        self._pending: list[tuple[str, str, object]] = []
        self._lock = threading.Condition()
        self.tools = {t.name: KitTool(self, t) for t in case.tools}

    def expect(self, calls: Iterable[tuple[str, str, object]]) -> None:
        """The calls one step carries, as ``(call_id, tool, parsed arguments)``."""
        with self._lock:
            self._pending = list(calls)

    def attribute(self, tool: str, arguments: object) -> str:
        """The call an entry into ``tool`` with ``arguments`` belongs to."""
        with self._lock:
            pending = self._pending
            match = next((p for p in pending if p[1] == tool and p[2] == arguments), None)
            match = match or next((p for p in pending if p[1] == tool), None)
            if match is None:
                return self.current_call
            pending.remove(match)
            return match[0]

    def effect_order(self) -> list[str]:
        """The calls in the order their effects happened."""
        with self._lock:
            return [r.call_id for r in self.records if r.what == "effect"]

    def writing(self, delta: int) -> None:
        """Count a write call in (+1) or out (-1)."""
        with self._lock:
            self._writing += delta
            self.most_writes_at_once = max(self.most_writes_at_once, self._writing)

    def set_fault(self, step: SetFault) -> None:
        """Apply a ``fault`` step."""
        self._faults[step.tool] = step

    def fault_of(self, tool: str) -> SetFault | None:
        """The fault ``tool`` has now, if any."""
        fault = self._faults.get(tool)
        return fault if fault is not None and fault.fault is not None else None

    def count(self, what: Literal["entered", "effect"], *, call: str = "", tool: str = "") -> int:
        """How many records of ``what`` (for ``call`` and/or ``tool`` when given)."""
        with self._lock:
            return sum(
                1
                for r in self.records
                if r.what == what
                and (not call or r.call_id == call)
                and (not tool or r.tool == tool)
            )

    def record(self, record: Record) -> None:
        """Keep one record."""
        with self._lock:
            self.records.append(record)

    def running(self, delta: int) -> None:
        """Count a tool call in (+1) or out (-1)."""
        with self._lock:
            self._running += delta
            self._lock.notify_all()

    def settle(self, limit: float = SETTLE_LIMIT) -> bool:
        """Wait until no kit tool is running (at most ``limit`` seconds); whether it settled."""
        with self._lock:
            return self._lock.wait_for(lambda: self._running == 0, timeout=limit)


class KitTool:
    """A tool implementation that records its effects and plays its fault.

    Call it with the parsed arguments (sync, or ``await tool.acall(...)``). A runtime
    that tracks the commit boundary passes ``on_effect``: it is called right after
    the effect, before the tool returns or fails (R9).
    """

    def __init__(self, world: World, spec: ToolDef) -> None:
        self.world = world
        self.spec = spec

    def __call__(
        self, arguments: Mapping[str, object], *, on_effect: Callable[[], None] | None = None
    ) -> dict[str, object]:
        """Run the tool (blocking while it is slow or hangs)."""
        return self._run(arguments, on_effect, time.sleep)

    async def acall(
        self, arguments: Mapping[str, object], *, on_effect: Callable[[], None] | None = None
    ) -> dict[str, object]:
        """Run the tool on the event loop (its waits are ``asyncio.sleep``)."""
        call_id, fault = self._enter(arguments)
        try:
            await asyncio.sleep(self._before(fault))
            self._effect(call_id, arguments, on_effect)
            await asyncio.sleep(self._after(fault))
            return self._result(fault)
        finally:
            self._leave()

    def _run(
        self,
        arguments: Mapping[str, object],
        on_effect: Callable[[], None] | None,
        sleep: Callable[[float], None],
    ) -> dict[str, object]:
        call_id, fault = self._enter(arguments)
        try:
            sleep(self._before(fault))
            self._effect(call_id, arguments, on_effect)
            sleep(self._after(fault))
            return self._result(fault)
        finally:
            self._leave()

    def _enter(self, arguments: Mapping[str, object]) -> tuple[str, SetFault | None]:
        world = self.world
        plain = dict(arguments) if isinstance(arguments, abc.Mapping) else arguments
        call_id = world.attribute(self.spec.name, plain)
        world.running(+1)
        if self.spec.writes:
            world.writing(+1)
        world.record(
            Record(call_id=call_id, tool=self.spec.name, what="entered", arguments=arguments)
        )
        return call_id, world.fault_of(self.spec.name)

    def _leave(self) -> None:
        if self.spec.writes:
            self.world.writing(-1)
        self.world.running(-1)

    def _before(self, fault: SetFault | None) -> float:
        kind = None if fault is None else fault.fault
        if kind == "refuse_before_effect":
            msg = f"{self.spec.name}: the far side refused; nothing was changed"
            raise Refusal(msg)
        return SLOW_BEFORE_EFFECT if kind == "slow_before_effect" else 0.0

    def _effect(
        self, call_id: str, arguments: Mapping[str, object], on_effect: Callable[[], None] | None
    ) -> None:
        self.world.record(
            Record(call_id=call_id, tool=self.spec.name, what="effect", arguments=arguments)
        )
        if on_effect is not None:
            on_effect()

    def _after(self, fault: SetFault | None) -> float:
        kind = None if fault is None else fault.fault
        if kind == "raise_after_effect":
            msg = f"{self.spec.name}: connection reset after the request was sent"
            raise ResponseLost(msg)
        return self.spec.timeout_seconds + HANG_PAST_TIMEOUT if kind == "hang_after_effect" else 0.0

    def _result(self, fault: SetFault | None) -> dict[str, object]:
        value = dict(self.spec.returns)
        if fault is None:
            return value
        if fault.fault == "inject_instruction":
            return {k: fault.injected if isinstance(v, str) else v for k, v in value.items()}
        if fault.fault == "unexpected_field":
            return {**value, "instruction": fault.injected}
        return value
