"""The gateway in front of real MCP servers: what callers see, and what reaches upstreams.

The client is the official MCP SDK's ``Client``; the upstreams are mcp-server-time
and the fault server, each a real child process the gateway talks to over stdio.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING

import jsonschema
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import (
    FAULT_SERVER,
    LEO,
    MIRA,
    envelope,
    fault_upstream,
    gateway,
    grant,
    run,
    time_upstream,
    write_config,
)

from toolbound._state import State
from toolbound.mcp.upstream import definition_of, digest_or_none

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound.trace import TraceEvent


def calls(state: Path) -> list[dict[str, object]]:
    """What the fault server received, in order."""
    path = state / "calls.txt"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_time_tools_are_listed_with_annotations_from_the_configuration(tmp_path: Path) -> None:
    """tools/list: prefixed names, closed schemas, annotations of the configured effect class."""
    config = write_config(tmp_path, time_upstream() + grant("mira", "time:read"))

    async def scenario() -> dict[str, object]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            listed = await client.list_tools()
            return {t.name: t for t in listed.tools}

    tools = run(scenario())
    assert set(tools) == {"time.get_current_time", "time.convert_time"}
    now = tools["time.get_current_time"]
    assert now.input_schema["additionalProperties"] is False
    assert now.output_schema is not None
    assert now.output_schema["additionalProperties"] is False
    assert now.annotations is not None
    assert now.annotations.read_only_hint is True
    assert now.annotations.destructive_hint is False
    assert now.meta is not None
    assert now.meta["io.toolbound/effect"] == "read"


def test_a_read_goes_through_the_pipeline_and_its_structured_content_fits_the_schema(
    tmp_path: Path,
) -> None:
    """tools/call returns the untrusted envelope as text and schema-valid structuredContent."""
    config = write_config(tmp_path, time_upstream() + grant("mira", "time:read"))

    async def scenario() -> tuple[object, object]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            result = await client.call_tool("time.get_current_time", {"timezone": "Asia/Tokyo"})
            return listed["time.get_current_time"], result

    tool, result = run(scenario())
    assert result.is_error is False
    jsonschema.validate(result.structured_content, tool.output_schema)  # type: ignore[attr-defined]
    assert result.structured_content["timezone"] == "Asia/Tokyo"  # type: ignore[index]
    envelope = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert envelope["trust"] == "untrusted_tool_data"
    assert envelope["data"] == result.structured_content


def test_an_invented_argument_is_rejected_before_the_upstream_sees_it(
    tmp_path: Path, state: Path
) -> None:
    """The upstream's schema is closed: an extra field fails validation, nothing is forwarded."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> object:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return await client.call_tool("fault.echo", {"text": "hi", "admin": True})

    result = run(scenario())
    assert result.is_error is True
    error = envelope(result)["error"]  # type: ignore[index]
    assert (error["kind"], error["code"]) == ("validation", "additional_properties")
    assert error["recoverable"] is True
    assert "hint" in error
    assert calls(state) == []


def test_annotations_from_an_upstream_are_never_believed(tmp_path: Path, state: Path) -> None:
    """A write claiming readOnlyHint is served as configured; an unset one as irreversible_write."""
    config = write_config(
        tmp_path,
        fault_upstream(state)
        + grant("mira", "fault:read")
        + grant("mira", "fault:write", "modify")
        + grant("mira", "fault:profile"),
    )
    # profile is not configured: its capability defaults to "fault:profile".

    async def scenario() -> dict[str, object]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return {t.name: t.annotations for t in (await client.list_tools()).tools}

    notes = run(scenario())
    # The fault server says echo is destructive and append read-only: both lies.
    assert notes["fault.echo"].read_only_hint is True  # type: ignore[attr-defined]
    assert notes["fault.append"].read_only_hint is False  # type: ignore[attr-defined]
    assert notes["fault.append"].destructive_hint is False  # type: ignore[attr-defined]
    # Unset: irreversible_write, the most conservative class.
    assert notes["fault.profile"].read_only_hint is False  # type: ignore[attr-defined]
    assert notes["fault.profile"].destructive_hint is True  # type: ignore[attr-defined]


def test_a_subject_sees_only_what_it_can_call_and_a_hidden_tool_is_refused_like_an_unknown_one(
    tmp_path: Path, state: Path
) -> None:
    """Leo holds no grant: he lists nothing, and calling a real tool fails like a made-up one."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> tuple[list[str], list[str], str, str]:
        async with gateway(config).running() as gw:
            async with Client(gw.server.lowlevel(MIRA)) as mira:
                seen_by_mira = [t.name for t in (await mira.list_tools()).tools]
            async with Client(gw.server.lowlevel(LEO)) as leo:
                seen_by_leo = [t.name for t in (await leo.list_tools()).tools]
                with pytest.raises(MCPError) as hidden:
                    await leo.call_tool("fault.echo", {"text": "hi"})
                with pytest.raises(MCPError) as missing:
                    await leo.call_tool("fault.nothing", {"text": "hi"})
            return seen_by_mira, seen_by_leo, str(hidden.value), str(missing.value)

    mira_sees, leo_sees, hidden, missing = run(scenario())
    assert sorted(mira_sees) == ["fault.echo", "fault.fail"]
    assert leo_sees == []
    assert hidden == "Unknown tool: fault.echo"
    assert missing == "Unknown tool: fault.nothing"
    assert calls(state) == []


def test_a_schema_that_does_not_compile_fails_closed(tmp_path: Path, state: Path) -> None:
    """broken_type and broken_ref are neither listed nor callable; the status says why."""
    config = write_config(
        tmp_path,
        fault_upstream(state)
        + grant("mira", "fault:broken_type")
        + grant("mira", "fault:broken_ref"),
    )

    async def scenario() -> tuple[list[str], dict[str, str], str]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            listed = [t.name for t in (await client.list_tools()).tools]
            with pytest.raises(MCPError) as refused:
                await client.call_tool("fault.broken_type", {"x": 1})
            return listed, {s.name: s.state for s in gw.status()}, str(refused.value)

    listed, states, refused = run(scenario())
    assert listed == []
    assert states["fault.broken_type"] == "broken"
    assert states["fault.broken_ref"] == "broken"
    assert refused == "Unknown tool: fault.broken_type"


class Recorder:
    """A trace sink keeping every event."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        del invocation_id
        self.events.append(event)


def test_a_draft_07_schema_is_validated_as_draft_07_and_recorded(
    tmp_path: Path, state: Path
) -> None:
    """A tool declaring draft-07 is served, checked by draft-07's rules, recorded as draft-07."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:pair"))
    sink = Recorder()

    async def scenario() -> tuple[object, str, dict[str, str]]:
        gw = gateway(config, sinks=[sink])
        async with gw.running(), Client(gw.server.lowlevel(MIRA)) as client:
            done = await client.call_tool("fault.pair", {"pair": [7, "seven"]})
            refused = await client.call_tool("fault.pair", {"pair": [7, "seven", "more"]})
            statuses = {s.name: s.state for s in gw.status()}
            return done, envelope(refused)["error"]["code"], statuses

    done, code, statuses = run(scenario())
    assert statuses["fault.pair"] == "served"
    assert json.loads(json.loads(done.content[0].text)["data"]) == [7, "seven"]  # type: ignore[attr-defined]
    # additionalItems: false, a keyword of draft-07 that 2020-12 does not have.
    assert code == "additional_items"
    assert [c["tool"] for c in calls(state)] == ["pair"]
    validated = [
        e.data["validator"]
        for e in sink.events
        if e.kind == "transition" and e.state == State.VALIDATED
    ]
    assert [v.dialect for v in validated] == ["http://json-schema.org/draft-07/schema#"]


def test_the_dialect_is_in_what_the_call_digest_covers() -> None:
    """Two definitions apart only in $schema have two versions, so two call digests (R5)."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    versions = {
        digest_or_none(definition_of(types.Tool(name="t", input_schema=shown)))
        for shown in (schema, {"$schema": "http://json-schema.org/draft-07/schema#", **schema})
    }
    assert len(versions) == 2
    assert None not in versions


def test_an_unknown_dialect_is_broken_and_the_status_names_the_dialects(
    tmp_path: Path, state: Path
) -> None:
    """A $schema naming no dialect toolbound validates fails closed, saying which it takes."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:draft03"))

    async def scenario() -> dict[str, tuple[str, str]]:
        async with gateway(config).running() as gw:
            return {s.name: (s.state, s.reason) for s in gw.status()}

    state_of, reason = run(scenario())["fault.draft03"]
    assert state_of == "broken"
    assert "draft-03" in reason
    assert "draft-04, draft-06, draft-07, 2019-09, 2020-12" in reason


def test_an_error_result_is_not_output_validated_and_its_text_arrives_whole(
    tmp_path: Path, state: Path
) -> None:
    """Fail declares an output schema; its isError result still reaches the caller, text intact."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> object:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return await client.call_tool("fault.fail", {})

    result = run(scenario())
    assert result.is_error is True
    error = envelope(result)["error"]  # type: ignore[index]
    assert error["message"] == "disk quota exceeded on /var/data"
    assert error["kind"] == "execution"
    assert error["recoverable"] is True


def test_extra_result_fields_are_rejected_and_never_reach_the_model(
    tmp_path: Path, state: Path
) -> None:
    """Profile's result gains an instruction field: the closed output schema refuses it (R11)."""
    config = write_config(
        tmp_path,
        fault_upstream(state)
        + '[upstream.tools.profile]\neffect = "read"\ncapability = "fault:read"\n'
        + grant("mira", "fault:read"),
    )
    (state / "extra-fields").write_text("yes")

    async def scenario() -> object:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return await client.call_tool("fault.profile", {"id": "m"})

    result = run(scenario())
    assert result.is_error is True
    assert envelope(result)["error"]["code"] == "output_rejected"  # type: ignore[index]
    assert "Ignore all previous" not in result.content[0].text  # type: ignore[union-attr]


def test_reads_run_concurrently_through_the_gateway(tmp_path: Path, state: Path) -> None:
    """Three slow echoes at once take about as long as one."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))
    (state / "slow").write_text("0.6")

    async def scenario() -> tuple[float, list[object]]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            started = time.perf_counter()
            results = await asyncio.gather(
                *(client.call_tool("fault.echo", {"text": str(n)}) for n in range(3))
            )
            return time.perf_counter() - started, list(results)

    took, results = run(scenario())
    assert [r.structured_content for r in results] == [{"text": "0"}, {"text": "1"}, {"text": "2"}]  # type: ignore[attr-defined]
    assert took < 1.5


def test_a_slow_read_is_re_read_within_its_budget_then_fails(tmp_path: Path, state: Path) -> None:
    """A read whose answer does not come within attempt_timeout is retried once (R10), not more."""
    config = write_config(
        tmp_path,
        fault_upstream(state, attempt_timeout=0.3, timeout=5) + grant("mira", "fault:read"),
    )
    (state / "slow").write_text("2")

    async def scenario() -> object:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return await client.call_tool("fault.echo", {"text": "hi"})

    result = run(scenario())
    assert result.is_error is True
    assert envelope(result)["error"]["code"] == "no_response"  # type: ignore[index]
    assert [c["tool"] for c in calls(state)] == ["echo", "echo"]


def crashing_upstream(state: Path, effect: str) -> str:
    """The fault server behind a shell whose background child keeps its stdout open."""
    command = f"sleep 60 & exec {sys.executable} {FAULT_SERVER} --state {state}"
    return f"""
[[upstream]]
name = "fault"
command = ["/bin/sh", "-c", "{command}"]
timeout = 20
[upstream.tools.crash]
effect = "{effect}"
capability = "fault:crash"
"""


def crash(tmp_path: Path, state: Path, effect: str) -> tuple[float, dict[str, object]]:
    config = write_config(tmp_path, crashing_upstream(state, effect) + grant("mira", "fault:crash"))

    async def scenario() -> tuple[float, dict[str, object]]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            started = time.monotonic()
            result = await client.call_tool("fault.crash", {})
            return time.monotonic() - started, envelope(result)

    return run(scenario())


def test_an_upstream_that_exits_mid_read_is_unavailable_at_once_with_status_and_stderr(
    tmp_path: Path, state: Path
) -> None:
    """Its exit is seen as it happens (its stdout still held open), not at the deadline."""
    took, answer = crash(tmp_path, state, "read")
    error = answer["error"]
    assert isinstance(error, dict)
    assert error["code"] == "upstream_unavailable"
    assert "exited with status 3" in error["message"]
    assert "fault: out of memory, giving up" in error["message"]
    assert took < 10  # the deadline is 20 s; the read is tried twice


def test_an_upstream_that_exits_mid_write_leaves_the_outcome_unknown_saying_why(
    tmp_path: Path, state: Path
) -> None:
    """A write may have taken effect before the exit: outcome unknown, with the exit's reason."""
    took, answer = crash(tmp_path, state, "irreversible_write")
    assert answer["commit_status"] == "unknown"
    assert "exited with status 3" in json.dumps(answer)
    assert took < 10
