"""Every call kept in the journal, whichever surface ran it (R14, R19).

The HTTP service writes its own journal records as it answers. The other surfaces —
the MCP gateway, ``mcp-serve``, a program using the library (``Runtime(journal=…)``)
— run calls through a :class:`~toolbound.Runtime` and answer their callers directly;
a :class:`JournalRecorder` among that runtime's trace sinks keeps each of those
calls in the same journal, so ``toolbound trace ID`` and the console find it
whoever ran it: reads, rejections, denials, parked calls and outcomes alike.

A call's record is its trace — the events *are* the record (R14) — and a head row
projected from it, so the recorder sees every call the runtime runs, however it was
driven (a ``tools/call``, a console approval, an expired confirmation window).
Events are buffered per call in memory; when the call ends (its ``tool_message``,
the bytes sent back), or parks for a person, the events not yet written are handed
to a writer thread with the head they lead to, and written in one transaction. The
writer writes whatever has queued since its last round. The caller never waits for
the database: a failure to record is logged and counted
(:attr:`JournalRecorder.failures`) and never fails the call. A parked call keeps its
buffer, so when it ends the events after the parking follow those written before.

Every head written here is owned by the recorder's :attr:`~JournalRecorder.holder`
(one id per process and runtime). A parked call's head also carries a lease, which a
daemon thread renews while the process lives, and keeps its confirmation request
where the service's own parked calls keep theirs (``confirmation``): it is in the
one inbox, listed by ``/v1/confirmations`` and the console with its surface, and a
decision made there is handed over to the holder (:mod:`toolbound.inbox`). The
service's recovery never takes such a call over: it waits in its holder's runtime,
and once the lease has passed (the holder is gone) nobody can decide it.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections import OrderedDict
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from toolbound._state import OUTCOME_KIND, State
from toolbound.journal import StoredCall

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from toolbound.journal import Journal, Surface
    from toolbound.trace import TraceEvent

__all__ = ["JournalRecorder"]

_LOG = logging.getLogger("toolbound.recording")
_OPEN_MAX = 10_000
"""Calls followed at once; past it the oldest (a parked call long forgotten) is dropped."""
LEASE = 30.0
"""Seconds a parked call stays its holder's without a renewal (renewed every third)."""


class JournalRecorder:
    """A trace sink that keeps each call of one surface in ``journal``.

    ``principal_of(subject, tenant)`` names the principal a subject acts as (the
    subject itself by default). ``holder`` names this process as the owner of its
    calls (unique by default; a program that resumes its calls after a restart may
    give a stable one); each parked call is held for ``lease`` seconds, renewed while
    the recorder runs. Call :meth:`flush` to wait until every call that ended so far
    is written, :meth:`close` to write them and stop (the journal stays open: its
    owner closes it).
    """

    def __init__(
        self,
        journal: Journal,
        *,
        surface: Surface,
        principal_of: Callable[[str, str], str] | None = None,
        holder: str | None = None,
        lease: float = LEASE,
    ) -> None:
        self.journal = journal
        self.surface: Surface = surface
        self.holder = holder or f"{surface}-{os.urandom(8).hex()}"
        """This process as the owner of the calls it records (and holds when parked)."""
        self.lease = lease
        self._principal_of = principal_of or (lambda subject, _tenant: subject)
        self._open: OrderedDict[str, list[TraceEvent]] = OrderedDict()
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, tuple[TraceEvent, ...]] | None] = queue.Queue()
        self._written: OrderedDict[str, int] = OrderedDict()
        """Per call still open, how many of its events are in the journal (writer thread)."""
        self.recorded = 0
        """Rows written."""
        self.failures = 0
        """Rows that could not be written (each logged)."""
        self._writer = threading.Thread(
            target=self._write, name="toolbound-journal-recorder", daemon=True
        )
        self._writer.start()
        self._stopping = threading.Event()
        self._renewer = threading.Thread(
            target=self._renew, name="toolbound-journal-lease", daemon=True
        )
        self._renewer.start()

    # -- the sink ----------------------------------------------------------------------------

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        """Follow one call; at its ending (or parking) queue its row. Never raises."""
        with self._lock:
            events = self._open.get(invocation_id)
            if event.kind == "proposal":
                if events is None:
                    self._open[invocation_id] = [event]
                    while len(self._open) > _OPEN_MAX:
                        self._open.popitem(last=False)
                else:  # a parked call run again, decided: the same call's trace goes on
                    events.append(event)
                return
            if events is None:
                return  # a call begun before this sink, or dropped as too old
            events.append(event)
            # A later tool_message with a reason re-cuts an answer already recorded.
            if event.kind != "tool_message" or "reason" in event.data:
                return
            snapshot = tuple(events)
            if _last_state(snapshot) is not State.AWAITING_CONFIRMATION:
                del self._open[invocation_id]
        self._queue.put((invocation_id, snapshot))

    # -- lifetime ----------------------------------------------------------------------------

    def flush(self) -> None:
        """Wait until every call that ended so far is written (or failed to be)."""
        if self._writer.is_alive():  # after close() nothing more is written: no wait
            self._queue.join()

    def close(self) -> None:
        """Write what is queued and stop the writer and the renewals."""
        self._stopping.set()
        if self._writer.is_alive():
            self._queue.put(None)
            self._writer.join()
        if self._renewer.is_alive():
            self._renewer.join()

    def renew(self) -> int:
        """Extend the lease of every call this holder holds; how many. Never raises."""
        try:
            return self.journal.renew(self.holder, lease=self.lease)
        except Exception:  # noqa: BLE001 - the next round tries again
            _LOG.exception("could not renew the leases of %s", self.holder)
            return 0

    def _renew(self) -> None:
        while not self._stopping.wait(self.lease / 3):
            self.renew()

    # -- the writer thread -------------------------------------------------------------------

    def _write(self) -> None:
        while True:
            batch = [self._queue.get()]
            # Whatever queued meanwhile goes in the same round; a call seen twice
            # (parked, then ended) is written once, as it stands last.
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            latest: dict[str, tuple[TraceEvent, ...]] = {}
            stop = False
            for item in batch:
                if item is None:
                    stop = True
                else:
                    latest[item[0]] = item[1]
            for invocation_id, events in latest.items():
                self._put(invocation_id, events)
            for _ in batch:
                self._queue.task_done()
            if stop:
                return

    def _put(self, invocation_id: str, events: Sequence[TraceEvent]) -> None:
        written = self._written.pop(invocation_id, 0)
        try:
            call = replace(
                stored_call(invocation_id, events, self.surface, self._principal_of),
                owner=self.holder,
            )
            parked = call.status == "awaiting_confirmation"
            # The head and the events since the last write: one transaction. A parked
            # call is held (leased) while it waits here; an ended one needs nobody.
            self.journal.put_call(
                call, events=events[written:], lease=self.lease if parked else None
            )
        except Exception:  # noqa: BLE001 - a failure to record never fails a call
            self.failures += 1
            _LOG.exception("could not record invocation %s in the journal", invocation_id)
            written_now = written  # the next write of this call carries them again
        else:
            self.recorded += 1
            written_now = len(events)
        if trace_state(events) is State.AWAITING_CONFIRMATION:
            self._written[invocation_id] = written_now
            while len(self._written) > _OPEN_MAX:
                self._written.popitem(last=False)


def stored_call(
    invocation_id: str,
    events: Sequence[TraceEvent],
    surface: Surface,
    principal_of: Callable[[str, str], str],
) -> StoredCall:
    """The head row of one call, projected from its trace as far as it goes."""
    trace = [e.as_json() for e in events]
    proposal = _data(trace[0])
    subject = _mapping(proposal.get("subject"))
    facts = _facts(trace)
    message = facts["message"]
    state = str(trace_state(events).value)
    status = OUTCOME_KIND.get(trace_state(events), "cancelled")
    tool = str(facts["tool"] or proposal.get("name", ""))
    digest = facts["digest"]
    request = {
        "tool": proposal.get("name"),
        "version": proposal.get("version"),
        "arguments": _text(events[0].data.get("arguments")),
        "call_id": proposal.get("proposal_id"),
        "model_call_id": proposal.get("model_call_id"),
        "tools": proposal.get("visible"),
    }
    response: dict[str, object] = {
        "invocation_id": invocation_id,
        "call_id": proposal.get("proposal_id"),
        "tool": tool,
        "status": status,
        "state": state,
        "path": facts["path"],
        "digest": digest,
        "trace_id": proposal.get("trace_id"),
        "message": message,
    }
    if facts["problem"] is not None:
        response["problem"] = facts["problem"]
    parked = facts["parked"]
    if status == "awaiting_confirmation" and isinstance(parked, dict):
        response["confirmation"] = {
            "digest": parked.get("digest"),
            "reason": parked.get("reason"),
            "expires_at": parked.get("expires_at"),
        }
    human = {
        "invocation_id": invocation_id,
        "tool": tool,
        "state": state,
        "commit_status": facts["commit_status"],
        "arguments": facts["arguments"],
        "digest": digest,
        "value": facts["value"],
        "problem": facts["problem"],
        "external_resource_id": facts["external_resource_id"],
        "attempts": facts["attempts"],
        "cuts": facts["cuts"],
        "evidence": facts["evidence"],
    }
    body: dict[str, object] = {
        "request": request,
        "response": response,
        "human": human,
    }
    if isinstance(parked, dict):
        # Where the service keeps its own: the one desk finds every parked call (R7).
        body["confirmation"] = parked
    subject_id = str(subject.get("id", ""))
    tenant = str(subject.get("tenant", ""))
    decision = facts["decision"]
    return StoredCall(
        invocation_id=invocation_id,
        tenant=tenant,
        subject=subject_id,
        principal=principal_of(subject_id, tenant),
        tool=tool,
        status=status,
        state=state,
        digest=None if digest is None else str(digest),
        decision=None if decision is None else str(decision),
        approver=None if facts["approver"] is None else str(facts["approver"]),
        created_at=datetime.fromtimestamp(events[0].at, UTC),
        updated_at=datetime.fromtimestamp(events[-1].at, UTC),
        body=body,
        surface=surface,
    )


def trace_state(events: Sequence[TraceEvent]) -> State:
    """The state a call's trace last reached."""
    return _last_state(events) or State.PROPOSED


def _last_state(events: Sequence[TraceEvent]) -> State | None:
    return next((e.state for e in reversed(events) if e.state is not None), None)


def _facts(trace: list[dict[str, object]]) -> dict[str, object]:
    """What the trace says of the call, each fact as its last event gave it."""
    facts: dict[str, object] = dict.fromkeys(
        (
            "tool",
            "digest",
            "arguments",
            "problem",
            "value",
            "external_resource_id",
            "parked",
            "decision",
            "approver",
            "commit_status",
        )
    )
    path: list[object] = []
    attempts: list[object] = []
    evidence: object = []
    message: dict[str, object] = {"content": "", "is_error": False, "truncated": False}
    cuts: object = []
    for event in trace:
        data = _data(event)
        kind = event.get("kind")
        if kind == "transition":
            path.append(event.get("state"))
            for key, fact in (
                ("spec", "tool"),
                ("digest", "digest"),
                ("normalized", "arguments"),
                ("problem", "problem"),
                ("result", "value"),
                ("external_resource_id", "external_resource_id"),
                ("request", "parked"),
            ):
                if key in data:
                    facts[fact] = data[key]
            if "evidence" in data:
                evidence = data["evidence"]
        elif kind == "confirmation":
            record = _mapping(data.get("record"))
            facts["decision"] = "approved" if record.get("approved") else "denied"
            facts["approver"] = record.get("approver")
        elif kind == "attempt":
            attempts.append(data.get("attempt"))
        elif kind == "tool_message" and "reason" not in data:
            content = _text(data.get("content"))
            message = {
                "content": content,
                "is_error": bool(data.get("is_error")),
                "truncated": bool(data.get("truncated")),
            }
            cuts = data.get("cuts", [])
            facts["commit_status"] = _commit_status(content)
    return {
        **facts,
        "path": path,
        "attempts": attempts,
        "evidence": evidence,
        "message": message,
        "cuts": cuts,
    }


def _commit_status(content: str) -> object:
    """The commit status the answer sent back stated, if it stated one."""
    try:
        sent = json.loads(content)
    except ValueError:
        return None
    return sent.get("commit_status") if isinstance(sent, dict) else None


def _data(event: Mapping[str, object]) -> Mapping[str, object]:
    return _mapping(event.get("data"))


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, dict) and "utf8" in value:
        return str(value["utf8"])
    return "" if value is None else str(value)
