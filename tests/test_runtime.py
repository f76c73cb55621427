"""The pipeline end to end: states, outcomes, execution and the commit boundary (R2, R9)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from harness import LEO, MIRA, Harness, grant, proposal, spec
from toolbound import CommitUnknown, NotCommitted, ToolOutput
from toolbound._model import Resource
from toolbound._state import State
from toolbound.execution.tool import StaticSecrets
from toolbound.testing import FakeTool

S = State
MAIN_PATH = (
    S.PROPOSED,
    S.PARSED,
    S.VALIDATED,
    S.AUTHORIZED,
    S.PREPARED,
    S.EXECUTING,
    S.COMMITTED,
    S.OBSERVED,
)


def write_spec(**kw):
    return spec("write", effect="reversible_write", **kw)


def test_read_call_walks_the_main_path(harness: Harness):
    """A valid, authorized read goes PROPOSED → … → OBSERVED and returns its value."""
    tool = FakeTool(returns={"text": "hi"})
    harness.registry.register(spec(), tool)
    out = harness.run("echo", {"text": "hi"})
    assert out.kind == "observed"
    assert out.path == MAIN_PATH
    assert out.result.value == {"text": "hi"}
    assert out.result.commit_status == "committed"
    assert tool.calls == [{"text": "hi"}]


def test_invocation_carries_runtime_authority_not_arguments(harness: Harness):
    """Subject, capabilities, deadline and digest come from the runtime (R1)."""
    harness.registry.register(spec(), FakeTool(returns={"text": "x"}))
    out = harness.run("echo", {"text": "x"}, timeout=1.5)
    inv = out.invocation
    assert inv.subject == MIRA
    assert inv.granted_capabilities == frozenset({"test:use"})
    assert inv.digest.startswith("sha256:")
    assert inv.canonical == b'{"text":"x"}'
    assert (inv.deadline - harness.clock.now()).total_seconds() == pytest.approx(1.5)
    assert inv.idempotency_key is None  # reads need no key


def test_same_arguments_in_any_order_give_the_same_digest(harness: Harness):
    """Key order and whitespace in the bytes never change the digest (R5)."""
    harness.registry.register(
        spec(
            input_schema={
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "additionalProperties": False,
            },
            output_schema=None,
        ),
        FakeTool(returns={}),
    )
    one = harness.run("echo", b'{"a":1,"b":"x"}')
    two = harness.run("echo", b'{ "b" : "x",\n "a" : 1 }')
    assert one.invocation.digest == two.invocation.digest
    assert one.invocation_id != two.invocation_id


def test_other_tenant_changes_the_digest(harness: Harness):
    """The digest binds the tenant: the same call in another tenant differs (R5)."""
    harness.grants.append(grant(LEO.__class__(id="mira", tenant="other")))
    harness.registry.register(spec(), FakeTool(returns={"text": "x"}))
    a = harness.run("echo", {"text": "x"})
    b = harness.run("echo", {"text": "x"}, subject=MIRA.__class__(id="mira", tenant="other"))
    assert a.invocation.digest != b.invocation.digest


def test_semantic_check_rejects_before_authorization(harness: Harness):
    """A rule schema cannot express rejects the call as VALIDATION_REJECTED (R6)."""
    from toolbound import Problem

    def no_shouting(args, _ctx):
        if str(args["text"]).isupper():
            return Problem(kind="semantic", code="shouting", message="no", recoverable=True)
        return None

    tool = FakeTool(returns={"text": "x"})
    harness.registry.register(spec(semantic_check=no_shouting), tool)
    out = harness.run("echo", {"text": "HEY"})
    assert out.kind == "rejected"
    assert out.state is S.VALIDATION_REJECTED
    assert out.problem.code == "shouting"
    assert tool.calls == []


def test_target_check_version_conflict_fails_before_commit(harness: Harness):
    """A stale expected_version is a version conflict before anything runs (R6)."""
    from toolbound import Problem

    tool = FakeTool(returns={"text": "x"})

    def stale(_inv):
        return Problem(
            kind="target",
            code="version_conflict",
            message="moved on",
            recoverable=True,
            hint="read it again",
        )

    harness.registry.register(write_spec(target_check=stale), tool)
    out = harness.run("write", {"text": "x"})
    assert out.kind == "failed"
    assert out.path[-2:] == (S.AUTHORIZED, S.FAILED_BEFORE_COMMIT)
    assert out.problem.code == "version_conflict"
    assert "read it again" in out.message.text
    assert tool.calls == []


def test_resource_lookup_failure_fails_closed(harness: Harness):
    """A resource extractor that raises denies the call instead of skipping the check."""

    def boom(_args):
        msg = "db down"
        raise RuntimeError(msg)

    tool = FakeTool(returns={"text": "x"})
    harness.registry.register(spec(resources=boom), tool)
    out = harness.run("echo", {"text": "x"})
    assert out.state is S.AUTHORIZATION_REJECTED
    assert out.problem.code == "resource_lookup_failed"
    assert "db down" not in out.message.text
    assert tool.calls == []


# -- execution and the commit boundary (R9) ------------------------------------


def test_not_committed_signal_is_failed_before_commit(harness: Harness):
    """A tool raising NotCommitted ends FAILED_BEFORE_COMMIT with its code and hint."""
    harness.registry.register(
        write_spec(),
        FakeTool(raises=NotCommitted("card declined", code="declined", hint="use another")),
    )
    out = harness.run("write", {"text": "x"})
    assert out.kind == "failed"
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.result.commit_status == "not_committed"
    payload = out.message.payload
    assert payload["error"]["code"] == "declined"
    assert payload["error"]["hint"] == "use another"
    assert payload["commit_status"] == "not_committed"


def test_commit_unknown_signal_is_outcome_unknown(harness: Harness):
    """A tool raising CommitUnknown ends OUTCOME_UNKNOWN, never 'not executed' (R9)."""
    harness.registry.register(write_spec(), FakeTool(raises=CommitUnknown("response lost")))
    out = harness.run("write", {"text": "x"})
    assert out.kind == "outcome_unknown"
    assert out.state is S.OUTCOME_UNKNOWN
    assert out.result.commit_status == "unknown"
    assert out.message.payload["commit_status"] == "unknown"


def test_write_deadline_is_outcome_unknown_and_bounded(harness: Harness):
    """A write past its deadline returns on time as OUTCOME_UNKNOWN (R9, R17 row 6)."""
    harness.registry.register(write_spec(timeout=0.2), FakeTool(delay=1.0, returns={"text": "x"}))
    t0 = time.monotonic()
    out = harness.run("write", {"text": "x"})
    elapsed = time.monotonic() - t0
    assert out.kind == "outcome_unknown"
    assert out.problem.code == "deadline_exceeded"
    assert elapsed < 0.8


def test_read_deadline_fails_before_commit(harness: Harness):
    """A read past its deadline failed before any commit: it changed nothing."""
    harness.registry.register(spec(timeout=0.1), FakeTool(delay=0.5, returns={"text": "x"}))
    out = harness.run("echo", {"text": "x"})
    assert out.kind == "failed"
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.problem.kind == "timeout"


def test_request_timeout_tighter_than_tool_timeout_wins(harness: Harness):
    """The deadline is min(tool timeout, request deadline)."""
    harness.registry.register(spec(timeout=5.0), FakeTool(delay=0.5, returns={"text": "x"}))
    t0 = time.monotonic()
    out = harness.run("echo", {"text": "x"}, timeout=0.1)
    assert out.problem.code == "deadline_exceeded"
    assert time.monotonic() - t0 < 0.45


def test_marked_write_timeout_before_mark_fails_before_commit(harness: Harness):
    """A write that marks its commit boundary and times out before it changed nothing."""
    tool = FakeTool(delay=0.5, commit_at="after_delay", returns={"text": "x"})
    harness.registry.register(write_spec(timeout=0.1, marks_commit=True), tool)
    out = harness.run("write", {"text": "x"})
    assert out.state is S.FAILED_BEFORE_COMMIT


def test_marked_write_timeout_after_mark_is_committed(harness: Harness):
    """A write that crossed its commit mark and then timed out stays committed (R9)."""
    tool = FakeTool(delay=0.5, commit_at="before_delay", returns={"text": "x"})
    harness.registry.register(write_spec(timeout=0.1, marks_commit=True), tool)
    out = harness.run("write", {"text": "x"})
    assert out.kind == "failed"
    assert out.path[-2:] == (S.COMMITTED, S.FAILED_AFTER_COMMIT)
    assert out.committed
    assert out.problem.code == "result_lost"


def test_the_same_write_after_its_result_was_lost_is_not_run_and_says_so(harness: Harness):
    """R8, R9: a lost result's repeat runs nothing and says the effect happened (not "empty")."""
    tool = FakeTool(delay=0.5, commit_at="before_delay", returns={"text": "x"})
    harness.registry.register(write_spec(timeout=0.1, marks_commit=True), tool)
    first = harness.run("write", {"text": "x"})
    again = harness.run("write", {"text": "x"})
    assert first.problem.code == "result_lost"
    assert again.kind == "failed"
    assert again.path[-2:] == (S.COMMITTED, S.FAILED_AFTER_COMMIT)
    assert again.committed
    assert again.problem.code == "result_lost"
    assert first.invocation_id in again.problem.message
    assert len(tool.calls) == 1


def test_unexpected_exception_in_write_is_unknown(harness: Harness):
    """An unclassified exception from a write may hide a commit: OUTCOME_UNKNOWN."""
    harness.registry.register(write_spec(), FakeTool(raises=RuntimeError("secret internals")))
    out = harness.run("write", {"text": "x"})
    assert out.kind == "outcome_unknown"
    assert "secret internals" not in out.message.text
    assert out.trace.of_kind("tool_exception")[0].data["text"] == "secret internals"


def test_unexpected_exception_in_read_fails_before_commit(harness: Harness):
    """An exception from a read changed nothing: FAILED_BEFORE_COMMIT."""
    harness.registry.register(spec(), FakeTool(raises=ValueError("x")))
    out = harness.run("echo", {"text": "x"})
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.problem.code == "tool_error"


def test_tool_own_timeout_error_is_not_the_deadline(harness: Harness):
    """A TimeoutError raised by the tool itself is the tool's error, not our deadline."""
    harness.registry.register(spec(), FakeTool(raises=TimeoutError("socket")))
    out = harness.run("echo", {"text": "x"})
    assert out.problem.code == "tool_error"


def test_cancel_before_execution(harness: Harness):
    """A cancel set before execution ends CANCELLED_BEFORE_COMMIT; the tool never runs."""
    tool = FakeTool(returns={"text": "x"})
    harness.registry.register(write_spec(), tool)
    cancel = threading.Event()
    cancel.set()
    out = harness.run("write", {"text": "x"}, cancel=cancel)
    assert out.kind == "cancelled"
    assert out.state is S.CANCELLED_BEFORE_COMMIT
    assert out.commit_status == "not_committed"
    assert tool.calls == []


def test_cancel_during_marked_write_before_mark(harness: Harness):
    """Cancel during a write, before its commit mark: CANCELLED_BEFORE_COMMIT (R9)."""
    tool = FakeTool(delay=0.4, commit_at="after_delay", returns={"text": "x"})
    harness.registry.register(write_spec(marks_commit=True), tool)
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    out = harness.run("write", {"text": "x"}, cancel=cancel)
    assert out.kind == "cancelled"
    assert out.state is S.CANCELLED_BEFORE_COMMIT


def test_cancel_after_commit_stays_committed(harness: Harness):
    """Cancel after the commit mark: still COMMITTED, later steps stop (R9)."""
    tool = FakeTool(delay=0.4, commit_at="before_delay", returns={"text": "x"})
    harness.registry.register(write_spec(marks_commit=True), tool)
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    out = harness.run("write", {"text": "x"}, cancel=cancel)
    assert out.kind == "cancelled"
    assert out.commit_status == "committed"
    assert out.state is S.COMMITTED
    assert S.CANCELLED_BEFORE_COMMIT not in out.path


def test_cancel_during_unmarked_write_is_unknown(harness: Harness):
    """Cancel during a write that does not mark its boundary: OUTCOME_UNKNOWN."""
    harness.registry.register(write_spec(), FakeTool(delay=0.4, returns={"text": "x"}))
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    out = harness.run("write", {"text": "x"}, cancel=cancel)
    assert out.kind == "outcome_unknown"
    assert out.problem.code == "cancelled_during_write"


def test_tool_output_carries_external_id(harness: Harness):
    """ToolOutput's external resource id lands on the Result."""
    harness.registry.register(
        write_spec(), FakeTool(returns=ToolOutput({"text": "ok"}, external_resource_id="evt-9"))
    )
    out = harness.run("write", {"text": "x"})
    assert out.result.external_resource_id == "evt-9"
    assert out.human.external_resource_id == "evt-9"


# -- secrets ---------------------------------------------------------------------


def test_secrets_injected_at_execution_never_shown(clock):
    """A credential reaches the tool only; results, messages and trace never hold it (R6)."""
    h = Harness(clock, grant(), secrets=StaticSecrets({"api_key": "sk-live-123456"}))
    seen = {}

    def leaky(args, ctx):
        seen["key"] = ctx.secrets["api_key"]
        return {"text": f"used {ctx.secrets['api_key']}"}

    h.registry.register(spec(secrets=("api_key",)), leaky)
    out = h.run("echo", {"text": "x"})
    h.close()
    assert seen["key"] == "sk-live-123456"
    assert out.kind == "observed"
    assert b"sk-live-123456" not in out.message.content
    assert "sk-live-123456" not in json.dumps(out.human.as_json())
    assert "sk-live-123456" not in json.dumps(out.trace.as_json())
    assert out.message.payload["data"] == {"text": "used [redacted:secret]"}


def test_missing_secret_fails_before_commit(harness: Harness):
    """A tool whose credential is not configured never runs."""
    tool = FakeTool(returns={"text": "x"})
    harness.registry.register(spec(secrets=("api_key",)), tool)
    out = harness.run("echo", {"text": "x"})
    assert out.problem.code == "secret_unavailable"
    assert tool.calls == []


# -- sync and async ----------------------------------------------------------------


def test_async_tool_from_sync_api(harness: Harness):
    """An async tool runs from the sync API on the runtime's loop thread."""

    async def atool(args, _ctx):
        await asyncio.sleep(0.01)
        return {"text": str(args["text"]).upper()}

    harness.registry.register(spec(), atool)
    out = harness.run("echo", {"text": "x"})
    assert out.result.value == {"text": "X"}


def test_async_api_with_async_and_sync_tools(harness: Harness):
    """Arun runs async tools on the caller's loop and sync tools in workers."""

    async def atool(args, _ctx):
        await asyncio.sleep(0)
        return {"text": "a"}

    harness.registry.register(spec("a"), atool)
    harness.registry.register(spec("b"), FakeTool(returns={"text": "b"}))
    ctx = harness.context()

    async def main():
        return await asyncio.gather(
            harness.runtime.arun(proposal("a", {"text": "x"}), ctx),
            harness.runtime.arun(proposal("b", {"text": "x"}), ctx),
        )

    a, b = asyncio.run(main())
    assert (a.result.value, b.result.value) == ({"text": "a"}, {"text": "b"})


def test_async_deadline_cancels_async_tool(harness: Harness):
    """Arun's deadline really cancels an async write: OUTCOME_UNKNOWN on time."""
    cancelled = []

    async def slow(_args, _ctx):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return {"text": "late"}

    harness.registry.register(write_spec(timeout=0.1), slow)
    out = asyncio.run(harness.runtime.arun(proposal("write", {"text": "x"}), harness.context()))
    assert out.kind == "outcome_unknown"
    assert cancelled == [True]


def test_async_tool_answering_at_once(harness: Harness):
    """An async tool that never suspends is observed like any other."""

    async def quick(args, _ctx):
        return {"text": str(args["text"]).upper()}

    harness.registry.register(spec(), quick)
    out = asyncio.run(harness.runtime.arun(proposal("echo", {"text": "x"}), harness.context()))
    assert out.kind == "observed"
    assert out.result.value == {"text": "X"}
    assert out.path[-3:] == (State.EXECUTING, State.COMMITTED, State.OBSERVED)


def test_async_tool_failing_before_or_after_suspending(harness: Harness):
    """An error raised before the first await and one raised after it end the same way."""

    async def at_once(_args, _ctx):
        msg = "no"
        raise LookupError(msg)

    async def later(_args, _ctx):
        await asyncio.sleep(0)
        msg = "no"
        raise LookupError(msg)

    async def gives_up(_args, _ctx):
        raise asyncio.CancelledError

    harness.registry.register(spec("a"), at_once)
    harness.registry.register(spec("b"), later)
    harness.registry.register(spec("c"), gives_up)
    ctx = harness.context()

    async def main():
        return [await harness.runtime.arun(proposal(n, {"text": "x"}), ctx) for n in "abc"]

    a, b, c = asyncio.run(main())
    assert (a.kind, a.problem.code) == (b.kind, b.problem.code) == ("failed", "tool_error")
    assert a.problem.message.replace("a@", "") == b.problem.message.replace("b@", "")
    assert c.kind == "cancelled"


def test_async_caller_cancelled_while_the_tool_awaits(harness: Harness):
    """Cancelling arun's task after the tool suspended reaches the tool, then propagates."""
    seen = []

    async def waits(_args, _ctx):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {"text": "x"}

    harness.registry.register(spec(), waits)

    async def main():
        task = asyncio.create_task(
            harness.runtime.arun(proposal("echo", {"text": "x"}), harness.context())
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert seen == ["cancelled"]


def test_async_caller_cancellation_settles_then_propagates(harness: Harness):
    """Cancelling arun's task records the call's state and re-raises CancelledError."""
    tool = FakeTool(delay=0.3, commit_at="after_delay", returns={"text": "x"})
    harness.registry.register(write_spec(marks_commit=True), tool)
    sink: list = []

    class Sink:
        def emit(self, _invocation_id, event):
            sink.append(event)

    h = Harness(harness.clock, grant(), sinks=[Sink()])
    h.registry.register(write_spec(marks_commit=True), tool)

    async def main():
        task = asyncio.create_task(h.runtime.arun(proposal("write", {"text": "x"}), h.context()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    h.close()
    assert sink[-1].state is S.CANCELLED_BEFORE_COMMIT or sink[-1].kind == "tool_message"
    assert any(e.state is S.CANCELLED_BEFORE_COMMIT for e in sink)


def test_inline_tool_runs_on_caller_thread(harness: Harness):
    """inline=True runs a quick read on the calling thread."""
    where = []
    harness.registry.register(
        spec(), lambda a, c: where.append(threading.current_thread()) or {"text": "x"}, inline=True
    )
    harness.run("echo", {"text": "x"})
    assert where == [threading.current_thread()]


def test_resources_reach_the_policy(harness: Harness):
    """Resources named by the tool's extractor are what authorization sees."""
    from toolbound.gates.authorize import IdScope

    harness.grants[:] = [grant(scope=IdScope(frozenset({"r1"})))]
    harness.registry.register(
        spec(resources=lambda a: [Resource(kind="thing", id=str(a["text"]), action="read")]),
        FakeTool(returns={"text": "ok"}),
    )
    assert harness.run("echo", {"text": "r1"}).kind == "observed"
    assert harness.run("echo", {"text": "r2"}).state is S.AUTHORIZATION_REJECTED


def test_broken_semantic_check_fails_closed(harness: Harness):
    """A semantic check that raises rejects the call; the tool never runs."""

    def broken(_args, _ctx):
        msg = "bug"
        raise KeyError(msg)

    tool = FakeTool(returns={"text": "x"})
    harness.registry.register(spec(semantic_check=broken), tool)
    out = harness.run("echo", {"text": "x"})
    assert out.state is S.VALIDATION_REJECTED
    assert out.problem.code == "check_failed"
    assert "bug" not in out.message.text
    assert tool.calls == []


def test_broken_target_check_fails_closed(harness: Harness):
    """A target check that raises fails the call before commit; the tool never runs."""

    def broken(_inv):
        raise OSError

    tool = FakeTool(returns={"text": "x"})
    harness.registry.register(write_spec(target_check=broken), tool)
    out = harness.run("write", {"text": "x"})
    assert out.state is S.FAILED_BEFORE_COMMIT
    assert out.problem.code == "target_check_failed"
    assert tool.calls == []
