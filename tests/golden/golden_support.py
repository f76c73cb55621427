"""Golden snapshots of runtime outcomes: render, scrub, compare (R2, R9, R14).

An outcome is rendered to a JSON value holding what a refactor must preserve: its
kind, the state path, commit status, problem, the exact bytes sent to the model,
the result and its attempts, the human projection and the trace as
``[kind, state, {a few stable data keys}]`` events. Random ids (invocation, trace,
attempt, confirmation) become placeholders numbered in order of first appearance,
and timestamps become offsets from the fixed clock's start (``T+2.0``); digests stay,
since they are deterministic.

``TOOLBOUND_GOLDEN_UPDATE=1`` rewrites the stored snapshots; without it a missing or
different snapshot fails with a unified diff.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from toolbound import Problem
from toolbound.gates.confirm import Confirmation

if TYPE_CHECKING:
    from toolbound import Outcome, Preview
    from toolbound.trace import Trace

EXPECTED = Path(__file__).parent / "expected"
UPDATE = os.environ.get("TOOLBOUND_GOLDEN_UPDATE") == "1"
BASE = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)

_ISO_INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$")
_written: set[str] = set()  # snapshots rewritten in this session (update mode)

# The data keys each trace event kind keeps: the ones a refactor must not change.
# A kind not listed keeps no data, so a new kind still shows up in the diff.
_EVENT_KEYS: Mapping[str, tuple[str, ...]] = {
    "proposal": ("name", "proposal_id"),
    "transition": (
        "problem",
        "decision",
        "reason",
        "attempt",
        "replayed_from",
        "external_resource_id",
        "mark",
        "cancelled",
    ),
    "check_exception": ("type",),
    "tool_exception": ("type",),
    "confirmation": ("record",),
    "attempt": ("attempt",),
    "attempt_started": ("number",),
    "retry_decision": ("failure", "action", "delay"),
    "query": ("answer",),
    "read_back": ("verified", "matches"),
    "output_rejected": ("problem",),
    "ledger_write_failed": ("phase", "code"),
    "waiting_for": ("invocation",),
    "tool_message": ("is_error", "truncated", "reason"),
    "provenance": ("findings",),
}


class Ids:
    """Stable placeholders for the random ids of one scenario."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    def add(self, kind: str, value: str | None) -> None:
        if not value or value in self._names:
            return
        self._counts[kind] = self._counts.get(kind, 0) + 1
        self._names[value] = f"<{kind}-{self._counts[kind]}>"

    def learn(self, outcome: Outcome) -> None:
        """Every random id ``outcome`` carries, in order of appearance."""
        self.add("invocation", outcome.invocation_id)
        self.learn_trace(outcome.trace)

    def learn_trace(self, trace: Trace) -> None:
        self.add("invocation", trace.invocation_id)
        self.add("trace", trace.trace_id)
        for event in trace:
            self.add("attempt", _str(event.data.get("attempt_id")))
            attempt = event.data.get("attempt")
            self.add("attempt", getattr(attempt, "attempt_id", None))
            record = event.data.get("record")
            if isinstance(record, Confirmation):
                self.add("confirmation", record.confirmation_id)

    def scrub(self, value: object) -> object:
        """``value`` with every known id replaced and every instant made relative."""
        if isinstance(value, str):
            if _ISO_INSTANT.match(value):
                return _offset(datetime.fromisoformat(value))
            for raw, name in self._names.items():
                value = value.replace(raw, name)
            return value
        if isinstance(value, Mapping):
            return {str(k): self.scrub(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub(v) for v in value]
        return value


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _offset(at: datetime) -> str:
    return f"T+{(at - BASE).total_seconds():g}"


def _plain(value: object) -> object:  # noqa: PLR0911 - one return per shape
    """A JSON value for a piece of trace data, keeping only what is stable."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Problem):
        return value.code
    if isinstance(value, Confirmation):
        return {"approved": value.approved, "approver": value.approver}
    if isinstance(value, datetime):
        return _offset(value)
    if isinstance(value, list | tuple):
        return len(value) if not value or not isinstance(value[0], str) else list(value)
    if is_dataclass(value) and hasattr(value, "number"):  # an Attempt
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value) if f.name in _ATT}
    return repr(value)


_ATT = frozenset({"number", "outcome", "detail"})


def trace_view(trace: Trace) -> list[list[object]]:
    """The trace as ``[kind, state, {stable data}]`` per event, in order."""
    out: list[list[object]] = []
    for event in trace:
        keys = _EVENT_KEYS.get(event.kind, ())
        data = {k: _plain(event.data[k]) for k in keys if k in event.data}
        out.append([event.kind, None if event.state is None else event.state.value, data])
    return out


def problem_view(problem: Problem | None) -> dict[str, object] | None:
    if problem is None:
        return None
    return {
        "kind": problem.kind,
        "code": problem.code,
        "recoverable": problem.recoverable,
        "hint": problem.hint,
    }


def outcome_view(outcome: Outcome) -> dict[str, object]:
    """Everything about one outcome that a behaviour-preserving change must keep."""
    result = getattr(outcome, "result", None)
    commit = getattr(outcome, "commit_status", None)
    if commit is None and result is not None:
        commit = result.commit_status
    invocation = getattr(outcome, "invocation", None)
    request = getattr(outcome, "request", None)
    view: dict[str, object] = {
        "kind": outcome.kind,
        "state": outcome.state.value,
        "path": [s.value for s in outcome.path],
        "commit_status": commit,
        "problem": problem_view(getattr(outcome, "problem", None)),
        "replayed_from": getattr(outcome, "replayed_from", None),
        "message": {
            "is_error": outcome.message.is_error,
            "truncated": outcome.message.truncated,
            "content": outcome.message.content.decode(),
        },
        "invocation": None
        if invocation is None
        else {
            "idempotency_key": invocation.idempotency_key,
            "capabilities": sorted(invocation.granted_capabilities),
            "deadline": invocation.deadline,
        },
        "result": None
        if result is None
        else {
            "status": result.status,
            "commit_status": result.commit_status,
            "error": None if result.error is None else result.error.code,
            "external_resource_id": result.external_resource_id,
            "observed_at": result.observed_at,
            "attempts": [
                [a.number, a.outcome, a.detail, a.started_at, a.ended_at] for a in result.attempts
            ],
        },
        "human": outcome.human.as_json(),
        "trace": trace_view(outcome.trace),
    }
    if request is not None:
        view["request"] = {
            "tool": request.tool,
            "reason": request.reason,
            "requested_at": request.requested_at,
            "expires_at": request.expires_at,
        }
    return view


def preview_view(preview: Preview) -> dict[str, object]:
    return {
        "decision": preview.decision,
        "reason": preview.reason,
        "problem": problem_view(preview.problem),
        "arguments": preview.arguments,
        "digest": preview.digest,
    }


def _jsonable(value: object) -> object:
    if isinstance(value, datetime):
        return _offset(value)
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class Recorder:
    """Collects the views of one scenario, then scrubs them with one set of ids."""

    def __init__(self) -> None:
        self.ids = Ids()
        self.steps: dict[str, object] = {}

    def outcome(self, name: str, outcome: Outcome) -> Outcome:
        self.ids.learn(outcome)
        self.steps[name] = outcome_view(outcome)
        return outcome

    def value(self, name: str, value: object) -> None:
        self.steps[name] = value

    def snapshot(self) -> object:
        return self.ids.scrub(_jsonable(self.steps))


# -- storage and comparison ------------------------------------------------------------


def dumps(value: object) -> str:
    """Indented JSON, with any value whose compact form is short kept on one line."""
    return _dump(value, 0) + "\n"


def _dump(value: object, depth: int) -> str:
    compact = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if len(compact) + 2 * depth <= 100 or _one_line(value):
        return compact
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict):
        items = [
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_dump(v, depth + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    items = [f"{inner}{_dump(v, depth + 1)}" for v in value]
    return "[\n" + ",\n".join(items) + f"\n{pad}]"


def _one_line(value: object) -> bool:
    """Scalars, lists of scalars and trace events read best on one line."""
    if not isinstance(value, dict | list) or not value:
        return True
    if isinstance(value, dict):
        return False
    if all(not isinstance(v, dict | list) for v in value):
        return True
    return len(value) == 3 and isinstance(value[0], str) and isinstance(value[2], dict)


def check(name: str, recorder: Recorder) -> None:
    """Compare the scenario's snapshot with ``expected/<name>.json``, or rewrite it."""
    actual = dumps(recorder.snapshot())
    path = EXPECTED / f"{name}.json"
    # Two tests may share a snapshot (run and arun): the first rewrites, the next compares.
    if UPDATE and name not in _written:
        EXPECTED.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        _written.add(name)
        return
    if not path.exists():
        pytest.fail(
            f"no golden snapshot {path.name}; run with TOOLBOUND_GOLDEN_UPDATE=1 to create it",
            pytrace=False,
        )
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"expected/{path.name}",
            tofile="actual",
        )
        pytest.fail(f"golden snapshot {path.name} differs:\n{''.join(diff)}", pytrace=False)
