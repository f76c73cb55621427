"""A toolbound tool as a task of MCP's tasks extension (``io.modelcontextprotocol/tasks``).

In process over streamable HTTP, 2026-07-28, raw JSON-RPC (the SDK client has the
types, not the calls): a tool declaring ``task_support`` answers a
``CreateTaskResult`` once its call passed every gate, and ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` reach it, for its caller only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn
from mcp_support import LEO, MIRA, TOKENS, gateway, grant, run, serving, write_config

from toolbound import Grant, GrantPolicy, NotCommitted, Registry, Runtime, ToolSpec
from toolbound._state import State
from toolbound.define import tool
from toolbound.mcp import GuardedServer, HttpEndpoint, StaticCatalog, holds_capabilities

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from toolbound import ToolContext
    from toolbound._model import JSONObject, JSONValue
    from toolbound.trace import TraceEvent

TASKS = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"
GRANTS = [
    *(
        Grant(subject=s.id, tenant=s.tenant, capability="jobs:run", actions=frozenset({"read"}))
        for s in (MIRA, LEO)
    ),
    Grant(
        subject=MIRA.id,
        tenant=MIRA.tenant,
        capability="jobs:purge",
        actions=frozenset({"delete"}),
        confirm=True,
    ),
]
SLOW = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0}},
    "required": ["seconds"],
    "additionalProperties": False,
}
NOTHING = {"type": "object", "properties": {}}


async def _slow(args: JSONObject, _ctx: ToolContext) -> JSONValue:
    seconds = args["seconds"]
    assert isinstance(seconds, int | float)
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


async def _failing(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    msg = "the job failed"
    raise NotCommitted(msg, code="job_failed", recoverable=False)


async def _broken(_args: JSONObject, _ctx: ToolContext) -> JSONValue:
    return {"value": "not an integer"}


@tool(
    effect="irreversible_write",
    capabilities=("jobs:purge",),
    task_support="optional",  # declared beside the function
)
def purge(what: str) -> str:
    """Purges what it is told to; a person confirms it.

    Args:
        what: What to purge.

    """
    return f"purged {what}"


def _registry() -> Registry:
    r = Registry()
    purge.register(r)
    for name, schema, run_, support, output in (
        ("slow", SLOW, _slow, "optional", None),
        ("failing", NOTHING, _failing, "required", None),
        ("broken", NOTHING, _broken, "optional",
         {"type": "object", "properties": {"value": {"type": "integer"}}}),
    ):  # fmt: skip
        r.register(
            ToolSpec(
                name=name,
                version="v1",
                description=name,
                input_schema=schema,
                output_schema=output,
                effect="read",
                capabilities=("jobs:run",),
                timeout=60.0,
                task_support=support,  # type: ignore[arg-type]
            ),
            run_,  # type: ignore[arg-type]
        )
    return r


class Events:
    """A trace sink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[tuple[str, TraceEvent]] = []

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        self.events.append((invocation_id, event))


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def server(events: Events) -> Iterator[GuardedServer]:
    runtime = Runtime(policy=GrantPolicy(GRANTS), sinks=(events,))
    yield GuardedServer(
        runtime=runtime, catalog=StaticCatalog(_registry(), holds_capabilities(GRANTS))
    )
    runtime.close()


class Caller:
    """One caller's raw 2026-07-28 JSON-RPC over streamable HTTP."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str) -> None:
        self.http, self.url, self.token = http, url, token

    async def send(
        self, method: str, params: dict[str, Any], *, tasks: bool = True, name: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        caps: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {}} if tasks else {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": caps,
        }
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
        }
        named = name if name is not None else params.get("name", params.get("taskId"))
        if named is not None:
            headers["Mcp-Name"] = named
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        response = await self.http.post(self.url, json=body, headers=headers)
        return response.status_code, response.json()

    async def result(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        _status, body = await self.send(method, params, **kw)
        assert "result" in body, body
        body["result"].pop("_meta")  # the serverInfo stamp of every 2026-07-28 result
        return body["result"]  # type: ignore[no-any-return]

    async def error(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        _status, body = await self.send(method, params, **kw)
        assert "error" in body, body
        return body["error"]  # type: ignore[no-any-return]

    async def settled(self, task_id: str) -> dict[str, Any]:
        for _ in range(200):
            got = await self.result("tasks/get", {"taskId": task_id})
            if got["status"] in {"completed", "failed", "cancelled"}:
                return got
            await asyncio.sleep(0.02)
        raise AssertionError(task_id)


@contextlib.asynccontextmanager
async def callers(server: GuardedServer) -> AsyncIterator[tuple[Caller, Caller]]:
    """``server`` over HTTP on a free loopback port; mira and leo as its callers."""
    who = {TOKENS["mira"]: MIRA, TOKENS["leo"]: LEO}
    endpoint = HttpEndpoint(server, authenticate=who.get, allowed_hosts=["127.0.0.1:*"])
    web = uvicorn.Server(
        uvicorn.Config(
            endpoint.starlette("/mcp"), host="127.0.0.1", port=0, log_level="warning",
            lifespan="on",
        )
    )  # fmt: skip
    task = asyncio.create_task(web.serve())
    try:
        while not web.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.02)
        url = f"http://127.0.0.1:{web.servers[0].sockets[0].getsockname()[1]}/mcp"
        async with httpx.AsyncClient(timeout=10) as http:
            yield Caller(http, url, TOKENS["mira"]), Caller(http, url, TOKENS["leo"])
    finally:
        web.should_exit = True
        await task


def test_a_task_tool_answers_a_create_task_result_and_tasks_get_inlines_its_result(
    server: GuardedServer,
) -> None:
    """The call passed every gate, runs on; its task id is the call's proposal id."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            listed = await mira.result("tools/list", {})
            support = {
                t["name"]: t["_meta"].get("io.toolbound/taskSupport") for t in listed["tools"]
            }
            assert support == {
                "slow": "optional",
                "failing": "required",
                "broken": "optional",
                "purge": "optional",
            }
            created = await mira.result(
                "tools/call", {"name": "slow", "arguments": {"seconds": 0.3}}
            )
            assert created["resultType"] == "task"
            assert set(created) >= {"taskId", "status", "createdAt", "lastUpdatedAt"}
            assert isinstance(created["ttlMs"], int)
            assert isinstance(created["pollIntervalMs"], int)
            assert not {"result", "error", "requestState", "task", "content"} & set(created)
            task_id = created["taskId"]
            working = await mira.result("tasks/get", {"taskId": task_id})
            assert (working["status"], working["resultType"]) == ("working", "complete")
            assert "result" not in working
            done = await mira.settled(task_id)
            assert done["status"] == "completed"
            assert done["result"]["isError"] is False
            envelope = json.loads(done["result"]["content"][0]["text"])
            assert (envelope["call_id"], envelope["data"]) == (task_id, "slept 0.3s")
            assert await mira.result("tasks/update", {"taskId": task_id, "inputResponses": {}}) == {
                "resultType": "complete"
            }

    run(scenario())


def test_without_the_extension_an_optional_task_runs_now_and_a_required_one_is_refused(
    server: GuardedServer,
) -> None:
    """-32021 names the extension; tasks/* without it are -32021 too."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            now = await mira.result(
                "tools/call", {"name": "slow", "arguments": {"seconds": 0}}, tasks=False
            )
            assert (now["resultType"], now["isError"]) == ("complete", False)
            assert "taskId" not in now
            refused = await mira.error(
                "tools/call", {"name": "failing", "arguments": {}}, tasks=False
            )
            assert refused["code"] == -32021
            assert refused["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
            for method in ("tasks/get", "tasks/update", "tasks/cancel"):
                error = await mira.error(method, {"taskId": "x", "inputResponses": {}}, tasks=False)
                assert error["code"] == -32021, method

    run(scenario())


def test_a_task_belongs_to_its_caller_and_mcp_name_must_name_it(server: GuardedServer) -> None:
    """Another caller's tasks/get is an unknown task (-32602), as is an id never given."""

    async def scenario() -> None:
        async with callers(server) as (mira, leo):
            created = await mira.result("tools/call", {"name": "slow", "arguments": {"seconds": 5}})
            task_id = created["taskId"]
            theirs = await leo.error("tasks/get", {"taskId": task_id})
            never = await leo.error("tasks/get", {"taskId": "task-never-given"})
            assert theirs["code"] == never["code"] == -32602
            assert (await leo.error("tasks/cancel", {"taskId": task_id}))["code"] == -32602
            status, body = await mira.send("tasks/get", {"taskId": task_id}, name="another-task")
            assert body["error"]["code"] == -32020
            assert status == 400
            assert (await mira.result("tasks/get", {"taskId": task_id}))["status"] == "working"
            assert (await mira.result("tasks/cancel", {"taskId": task_id})) == {
                "resultType": "complete"
            }
            assert (await mira.settled(task_id))["status"] == "cancelled"

    run(scenario())


def test_cancel_is_the_runtime_s_own_cancellation(server: GuardedServer, events: Events) -> None:
    """The call ends CANCELLED in the trace; a second cancel is the same empty ack."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            created = await mira.result(
                "tools/call", {"name": "slow", "arguments": {"seconds": 30}}
            )
            task_id = created["taskId"]
            await asyncio.sleep(0.1)
            assert await mira.result("tasks/cancel", {"taskId": task_id}) == {
                "resultType": "complete"
            }
            cancelled = await mira.settled(task_id)
            assert cancelled["status"] == "cancelled"
            assert not {"result", "error"} & set(cancelled)
            assert await mira.result("tasks/cancel", {"taskId": task_id}) == {
                "resultType": "complete"
            }

    run(scenario())
    states = [e.state for _i, e in events.events if e.state is not None]
    assert states[-1] == State.CANCELLED_BEFORE_COMMIT, states


def test_a_call_the_gates_refuse_is_answered_at_once_not_as_a_task(server: GuardedServer) -> None:
    """Invalid arguments never become a task: the refusal is the tools/call result."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            refused = await mira.result(
                "tools/call", {"name": "slow", "arguments": {"seconds": -1}}
            )
            assert refused["resultType"] == "complete"
            assert refused["isError"] is True
            assert "taskId" not in refused

    run(scenario())


def test_a_tool_error_completes_the_task_and_a_broken_output_contract_fails_it(
    server: GuardedServer,
) -> None:
    """Completed with isError for the tool's own error; failed with -32603 for the server's."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            failing = await mira.result("tools/call", {"name": "failing", "arguments": {}})
            done = await mira.settled(failing["taskId"])
            assert (done["status"], done["result"]["isError"]) == ("completed", True)
            broken = await mira.result("tools/call", {"name": "broken", "arguments": {}})
            failed = await mira.settled(broken["taskId"])
            assert failed["status"] == "failed"
            assert "result" not in failed
            assert failed["error"]["code"] == -32603
            assert failed["error"]["data"]["error"]["code"] == "output_rejected"

    run(scenario())


def test_a_call_a_person_confirms_asks_through_its_task(server: GuardedServer) -> None:
    """input_required with the confirmation form; tasks/update's answer runs it, once."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            created = await mira.result("tools/call", {"name": "purge", "arguments": {"what": "a"}})
            assert (created["resultType"], created["status"]) == ("task", "input_required")
            task_id = created["taskId"]
            asked = await mira.result("tasks/get", {"taskId": task_id})
            assert asked["status"] == "input_required"
            assert asked["inputRequests"]["confirm"]["method"] == "elicitation/create"
            assert [p.invocation_id for p in server.runtime.pending()] != []
            bad = await mira.error(
                "tasks/update", {"taskId": task_id, "inputResponses": {"confirm": {"action": 3}}}
            )
            assert bad["code"] == -32602
            still = await mira.result("tasks/get", {"taskId": task_id})
            assert still["status"] == "input_required"
            other = {"unknown": {"action": "accept"}}
            await mira.result("tasks/update", {"taskId": task_id, "inputResponses": other})
            still = await mira.result("tasks/get", {"taskId": task_id})
            assert still["status"] == "input_required"
            yes = {"confirm": {"action": "accept", "content": {"approve": True}}}
            ack = await mira.result("tasks/update", {"taskId": task_id, "inputResponses": yes})
            assert ack == {"resultType": "complete"}
            done = await mira.settled(task_id)
            assert (done["status"], done["result"]["isError"]) == ("completed", False)
            assert json.loads(done["result"]["content"][0]["text"])["data"] == "purged a"
            assert "inputRequests" not in done
            denied = await mira.result("tools/call", {"name": "purge", "arguments": {"what": "b"}})
            no = {"confirm": {"action": "decline"}}
            await mira.result("tasks/update", {"taskId": denied["taskId"], "inputResponses": no})
            refused = await mira.settled(denied["taskId"])
            assert (refused["status"], refused["result"]["isError"]) == ("completed", True)
            dropped = await mira.result("tools/call", {"name": "purge", "arguments": {"what": "c"}})
            await mira.result("tasks/cancel", {"taskId": dropped["taskId"]})
            assert (await mira.settled(dropped["taskId"]))["status"] == "cancelled"
            assert server.runtime.pending() == []

    run(scenario())


def test_an_upstream_tool_whose_rule_says_so_runs_as_a_task_of_the_gateway(
    tmp_path: Path,
) -> None:
    """``task_support`` under ``[upstream.tools.NAME]``: the gateway's task, an ordinary call."""
    config = write_config(
        tmp_path,
        f"""
[[upstream]]
name = "time"
command = ["{sys.executable}", "-m", "mcp_server_time", "--local-timezone", "UTC"]
[upstream.tools.get_current_time]
effect = "read"
capability = "time:read"
task_support = "required"
"""
        + grant("mira", "time:read"),
    )

    async def scenario() -> None:
        gw = gateway(config)
        async with serving(gw) as url, httpx.AsyncClient(timeout=30) as http:
            mira = Caller(http, url, TOKENS["mira"])
            call = {"name": "time.get_current_time", "arguments": {"timezone": "UTC"}}
            refused = await mira.error("tools/call", call, tasks=False)
            assert refused["code"] == -32021
            created = await mira.result("tools/call", call)
            assert created["resultType"] == "task"
            done = await mira.settled(created["taskId"])
            assert (done["status"], done["result"]["isError"]) == ("completed", False)
            assert "UTC" in done["result"]["content"][0]["text"]

    run(scenario())


def test_a_task_running_when_the_server_stops_is_cancelled_not_left_executing(
    server: GuardedServer, events: Events
) -> None:
    """The server's shutdown cancels its running tasks through the runtime, at once."""

    async def scenario() -> None:
        async with callers(server) as (mira, _leo):
            slow = {"name": "slow", "arguments": {"seconds": 30}}
            assert (await mira.result("tools/call", slow))["status"] == "working"
            await asyncio.sleep(0.1)
        # The server stopped; this loop goes on.
        states = [e.state for _i, e in events.events if e.state is not None]
        assert states[-1] == State.CANCELLED_BEFORE_COMMIT, states

    run(scenario())
