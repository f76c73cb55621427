"""The calendar example (seed 000 §6.5, §6.6): a write that needs a person's yes.

``calendar.create_event@v1`` takes a date expression ("tomorrow", "2026-07-20")
that the runtime normalizes against the user's clock and timezone before the
digest is taken, so the confirmation binds the definite date. The tool marks its
commit boundary, so a cancel before the insert provably changed nothing.
``calendar.update_event@v1`` carries an ``expected_version`` precondition: a stale
one is a version conflict, found before anything is written.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from toolbound._errors import Problem
from toolbound._model import Resource, ToolSpec
from toolbound.execution.tool import NotCommitted, ToolOutput
from toolbound.gates.normalize import date_fields

if TYPE_CHECKING:
    from toolbound._model import Invocation, JSONObject, NormalizationContext
    from toolbound.execution.tool import ToolContext
    from toolbound.registry import Registry

__all__ = ["CalendarBackend", "create_event_spec", "register", "update_event_spec"]

_EVENT_OUT = {
    "type": "object",
    "properties": {
        "event_id": {"type": "string"},
        "calendar_id": {"type": "string"},
        "title": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "start": {"type": "string"},
        "duration_minutes": {"type": "integer"},
        "version": {"type": "integer"},
    },
    "required": ["event_id", "calendar_id", "title", "date", "start", "version"],
    "additionalProperties": False,
}

_MINUTES_PER_DAY = 24 * 60


@dataclass
class CalendarBackend:
    """Calendars and their events, in memory, with a write counter."""

    calendars: frozenset[str] = frozenset({"work", "home"})
    events: dict[str, dict[str, object]] = field(default_factory=dict)
    writes: int = 0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self, fields: JSONObject) -> dict[str, object]:
        """Insert one event (counted)."""
        with self._lock:
            event_id = f"evt-{next(self._ids)}"
            event: dict[str, object] = {"event_id": event_id, **fields, "version": 1}
            self.events[event_id] = event
            self.writes += 1
            return dict(event)

    def update(
        self, event_id: str, changes: JSONObject, expected_version: int
    ) -> dict[str, object]:
        """Change one event if it is still at ``expected_version`` (counted)."""
        with self._lock:
            event = self.events.get(event_id)
            if event is None:
                msg = f"no event {event_id}"
                raise NotCommitted(msg, code="not_found", recoverable=False)
            if event["version"] != expected_version:
                msg = f"event {event_id} is at version {event['version']}"
                raise NotCommitted(msg, code="version_conflict", hint="read the event again")
            event.update(changes)
            event["version"] = expected_version + 1
            self.writes += 1
            return dict(event)


def _start_minutes(start: str) -> int:
    hours, minutes = start.split(":")
    return int(hours) * 60 + int(minutes)


def _fits_in_day(arguments: JSONObject, _ctx: NormalizationContext) -> Problem | None:
    """An event must end on the day it starts (a rule schema cannot express)."""
    start = arguments.get("start")
    duration = arguments.get("duration_minutes", 30)
    if (
        isinstance(start, str)
        and isinstance(duration, int)
        and _start_minutes(start) + duration > _MINUTES_PER_DAY
    ):
        return Problem(
            kind="semantic",
            code="ends_after_midnight",
            message="the event would end after midnight",
            recoverable=True,
            hint="shorten it or split it across two days",
            pointer="/duration_minutes",
        )
    return None


def create_event_spec() -> ToolSpec:
    """``calendar.create_event@v1``."""
    return ToolSpec(
        name="calendar.create_event",
        version="v1",
        description="Create an event in one of the user's calendars.",
        purpose="Put a meeting or reminder on a calendar the user chose.",
        non_goals=("inviting other people", "recurring events"),
        input_schema={
            "type": "object",
            "properties": {
                "calendar_id": {"type": "string", "minLength": 1},
                "title": {"type": "string", "minLength": 1, "maxLength": 200},
                "date": {
                    "type": "string",
                    "minLength": 1,
                    "description": "YYYY-MM-DD, or today / tomorrow / a weekday name.",
                },
                "start": {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$"},
                "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 480},
            },
            "required": ["calendar_id", "title", "date", "start"],
            "additionalProperties": False,
        },
        output_schema=_EVENT_OUT,
        effect="reversible_write",
        capabilities=("calendar:write",),
        resources=lambda a: [Resource(kind="calendar", id=str(a["calendar_id"]), action="create")],
        normalizers=(date_fields("/date"),),
        semantic_check=_fits_in_day,
        idempotency="native_key",
        marks_commit=True,
        timeout=2.0,
        reads_untrusted=True,  # shared calendars hold events other people wrote
        reads_private=True,
    )


def update_event_spec(backend: CalendarBackend) -> ToolSpec:
    """``calendar.update_event@v1``, with an ``expected_version`` precondition."""

    def target(invocation: Invocation) -> Problem | None:
        event = backend.events.get(str(invocation.arguments["event_id"]))
        if event is None:
            return Problem(
                kind="target",
                code="not_found",
                message="there is no such event",
                recoverable=False,
            )
        if event["version"] != invocation.arguments["expected_version"]:
            return Problem(
                kind="target",
                code="version_conflict",
                message=f"the event changed: it is now at version {event['version']}",
                recoverable=True,
                hint="read the event again and redo the change on its current version",
                pointer="/expected_version",
            )
        return None

    return ToolSpec(
        name="calendar.update_event",
        version="v1",
        description="Rename or move an event, given the version you last read.",
        input_schema={
            "type": "object",
            "properties": {
                "calendar_id": {"type": "string", "minLength": 1},
                "event_id": {"type": "string", "minLength": 1},
                "expected_version": {"type": "integer", "minimum": 1},
                "title": {"type": "string", "minLength": 1, "maxLength": 200},
                "date": {"type": "string", "minLength": 1},
            },
            "required": ["calendar_id", "event_id", "expected_version"],
            "minProperties": 4,
            "additionalProperties": False,
        },
        output_schema=_EVENT_OUT,
        effect="reversible_write",
        capabilities=("calendar:write",),
        resources=lambda a: [Resource(kind="calendar", id=str(a["calendar_id"]), action="modify")],
        normalizers=(date_fields("/date"),),
        target_check=target,
        marks_commit=True,
        timeout=2.0,
        reads_untrusted=True,  # shared calendars hold events other people wrote
        reads_private=True,
    )


def register(registry: Registry, backend: CalendarBackend) -> None:
    """Register both calendar tools over ``backend``."""

    def create_event(arguments: JSONObject, ctx: ToolContext) -> ToolOutput:
        if arguments["calendar_id"] not in backend.calendars:
            msg = f"no calendar {arguments['calendar_id']}"
            raise NotCommitted(msg, code="not_found", recoverable=False)
        event = backend.create(arguments)
        ctx.mark_committed()
        return ToolOutput(event, external_resource_id=str(event["event_id"]))  # type: ignore[arg-type]

    def update_event(arguments: JSONObject, ctx: ToolContext) -> ToolOutput:
        changes = {k: v for k, v in arguments.items() if k in {"title", "date"}}
        version = arguments["expected_version"]
        assert isinstance(version, int)  # noqa: S101 - the schema guarantees it
        event = backend.update(str(arguments["event_id"]), changes, version)
        ctx.mark_committed()
        return ToolOutput(event, external_resource_id=str(event["event_id"]))  # type: ignore[arg-type]

    registry.register(create_event_spec(), create_event)
    registry.register(update_event_spec(backend), update_event)
