"""What the service itself adds to a call's one record, on SQLite and PostgreSQL.

A person's decision (and the reason for a denial) and the retention period, as an
operator meets them through :class:`Service`: each is an event on the call's trace,
and retention removes whole calls, never a parked one.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from service_config import DATABASE, config_text

from toolbound import FixedClock
from toolbound.config import parse_config
from toolbound.service.core import Service, Submission
from toolbound.service.decisions import note_denial


@pytest.fixture(params=["sqlite", "postgres"])
def service(request, tmp_path, effects_path):
    if request.param == "sqlite":
        url = "sqlite:///toolbound.db"
    else:
        cluster = request.getfixturevalue("pg_cluster")
        schema = request.getfixturevalue("pg_conninfo").split("search_path=")[1].rstrip("'")
        url = (
            f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{DATABASE}"
            f"?options={quote(f'-c search_path={schema}')}"
        )
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text(url, confirm_writes=False))
    made = Service(
        parse_config(path.read_text(), source=path),
        clock=FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC)),
    )
    yield made
    made.close()


def who(service: Service, name: str):
    return next(p for p in service.config.principals if p.name == name)


def submit(service: Service, tool: str, text: str) -> dict:
    body = f'{{"tool": "{tool}", "arguments": "{{\\"text\\": \\"{text}\\"}}", "call_id": "c"}}'
    _, answer, _ = asyncio.run(
        service.submit(who(service, "agent"), Submission.from_body(body.encode()))
    )
    return json.loads(answer)


def test_a_denial_and_its_reason_are_events_on_the_calls_trace(service: Service) -> None:
    """The decision binds to the digest shown and carries the reason, before the run on."""
    parked = submit(service, "notes.send", "no")
    call_id, digest = parked["invocation_id"], parked["digest"]
    asyncio.run(
        service.decide(
            who(service, "ana"), call_id, digest=digest, decision="deny", reason="not to them"
        )
    )
    trace = service.journal.events(call_id)
    kinds = [e["kind"] for e in trace]
    decision = trace[kinds.index("decision")]
    assert decision["data"] == {
        "decision": "denied",
        "approver": "ana",
        "digest": digest,
        "reason": "not to them",
    }
    assert "denial_reason" not in kinds  # told once, on the decision
    assert kinds.index("decision") < kinds.index("tool_message", kinds.index("decision"))
    assert service.journal.get_call(call_id).status == "rejected"


def test_a_reason_given_after_the_denial_is_an_event_of_its_own(service: Service) -> None:
    """A denial recorded without a reason takes one later, once, appended to the trace."""
    parked = submit(service, "notes.send", "no")
    call_id, digest = parked["invocation_id"], parked["digest"]
    asyncio.run(service.decide(who(service, "ana"), call_id, digest=digest, decision="deny"))
    note_denial(service, who(service, "ana"), call_id, reason="not to them")
    trace = service.journal.events(call_id)
    assert trace[-1]["kind"] == "denial_reason"
    assert trace[-1]["data"]["reason"] == "not to them"
    assert [e["kind"] for e in trace].count("decision") == 1


def test_retention_through_the_service_keeps_a_parked_call_and_drops_an_ended_one(
    service: Service,
) -> None:
    """Past the retention period an ended call goes, head and events; a parked one stays."""
    ended = submit(service, "notes.add", "old")["invocation_id"]
    parked = submit(service, "notes.send", "waiting")["invocation_id"]
    later = service.config.retention + timedelta(days=1)
    service.clock.advance(later.total_seconds())  # type: ignore[attr-defined]
    assert service.purge() == 1
    assert service.journal.get_call(ended) is None
    assert service.journal.events(ended) == []
    assert service.journal.get_call(parked).status == "awaiting_confirmation"
    assert service.journal.events(parked)[0]["kind"] == "proposal"
