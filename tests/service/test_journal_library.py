"""A plain Python program's calls, kept in the journal: ``Runtime(journal=...)`` (R14, R19).

Each call the library runs — a read, a rejection, a parked call approved in the
program — is one record in the same journal the service and the MCP surfaces write,
with surface "library", so ``toolbound trace ID`` shows it like any other.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner
from service_config import config_text

from harness import Harness, grant, spec
from toolbound.cli import _cli
from toolbound.config import load_config
from toolbound.testing import FakeTool
from toolbound.wiring import journal_for

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound import FixedClock
    from toolbound.journal import Journal


def store(tmp_path: Path) -> tuple[Path, Journal]:
    """A service configuration and the journal of its store, as a program would open it."""
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text(f"sqlite:///{tmp_path / 'toolbound.db'}"))
    return path, journal_for(load_config(path).store_url)


def trace(config: Path, invocation_id: str) -> str:
    result = CliRunner().invoke(
        _cli, ["trace", invocation_id, "--config", str(config)], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_a_library_runtime_keeps_every_call_and_toolbound_trace_shows_it(
    tmp_path: Path, clock: FixedClock
) -> None:
    """A read and a rejection, run by a program, are in the journal with their traces."""
    config, journal = store(tmp_path)
    h = Harness(clock, grant(), journal=journal)
    h.registry.register(spec(), FakeTool(returns={"text": "hi"}))
    read = h.run("echo", {"text": "hi"})
    refused = h.run("echo", {"text": 3})
    h.close()  # writes what is pending
    try:
        calls = {c.invocation_id: c for c in journal.list_calls("acme")}
        assert {calls[read.invocation_id].status, calls[refused.invocation_id].status} == {
            "observed",
            "rejected",
        }
        assert {c.surface for c in calls.values()} == {"library"}
        kinds = [e["kind"] for e in journal.events(read.invocation_id)]
        assert kinds[0] == "proposal"
        assert kinds[-1] == "tool_message"
        assert len(kinds) == len(read.trace)
    finally:
        journal.close()
    shown = trace(config, read.invocation_id)
    assert "surface library" in shown
    assert "proposal" in shown
    assert "tool_message" in shown


def test_a_call_parked_and_approved_in_a_program_is_one_record(
    tmp_path: Path, clock: FixedClock
) -> None:
    """R14: the parking's events stay first; the decision, then the approval's run follow."""
    _, journal = store(tmp_path)
    h = Harness(clock, grant(confirm=True), journal=journal, confirmation_ttl=timedelta(minutes=10))
    h.registry.register(spec("write", effect="reversible_write"), FakeTool(returns={"text": "x"}))
    parked = h.run("write", {"text": "x"})
    assert h.runtime.recorder is not None
    h.runtime.recorder.flush()
    waiting = journal.get_call(parked.invocation_id)
    assert waiting is not None
    assert waiting.status == "awaiting_confirmation"
    before = journal.events(parked.invocation_id)
    done = h.runtime.approve(parked.invocation_id, digest=parked.request.digest, approver="ana")
    h.close()
    try:
        ended = journal.get_call(parked.invocation_id)
        assert ended is not None
        assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ana")
        events = journal.events(parked.invocation_id)
        assert events[: len(before)] == before
        assert "confirmation" in [e["kind"] for e in events[len(before) :]]
        assert [e["seq"] for e in events] == list(range(len(events)))
        # One trace, the parking's events first; the local decision was recorded by
        # compare-and-set (R7) as a decision event, between the parking and the run.
        assert events[len(before)]["kind"] == "decision"
        assert len(events) == len(done.trace) + 1
    finally:
        journal.close()


def test_a_framework_integration_given_such_a_runtime_keeps_its_calls(
    tmp_path: Path, clock: FixedClock
) -> None:
    """Pydantic AI's toolset over a runtime with a journal: the agent's call is recorded."""
    agents = pytest.importorskip("pydantic_ai")
    from pydantic_ai.models.test import TestModel

    from toolbound.integrations.pydantic_ai import ToolboundToolset

    _, journal = store(tmp_path)
    h = Harness(clock, grant(), journal=journal)
    tool = FakeTool(returns={"text": "hi"})
    h.registry.register(spec(), tool)
    toolset: ToolboundToolset[None] = ToolboundToolset(h.runtime, h.context())
    # asyncio.run closes its loop (run_sync would leave one open to the end of the session).
    asyncio.run(agents.Agent(TestModel(), toolsets=[toolset]).run("echo something"))
    h.close()
    try:
        [call] = journal.list_calls("acme")
        assert (call.surface, call.tool, call.status) == ("library", "echo@v1", "observed")
        assert journal.events(call.invocation_id)[0]["kind"] == "proposal"
        assert len(tool.calls) == 1
    finally:
        journal.close()
