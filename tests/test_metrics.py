"""Prometheus metrics: every answer counted by tool and outcome, never by a made-up name."""

import multiprocessing

import pytest

from harness import Harness, grant, spec
from toolbound._state import State
from toolbound.metrics import CallMetrics
from toolbound.testing import FakeTool
from toolbound.trace import TraceEvent


@pytest.fixture
def counted(clock):
    metrics = CallMetrics()
    h = Harness(clock, grant(), grant(capability="test:write", confirm=True), sinks=(metrics,))
    h.registry.register(spec("echo"), FakeTool(returns={"text": "ok"}))
    h.registry.register(
        spec("write", effect="reversible_write", capabilities=("test:write",)),
        FakeTool(returns={"text": "done"}),
    )
    yield h, metrics
    h.close()


def count(metrics: CallMetrics, tool: str, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "toolbound_tool_calls_total", {"tool": tool, "outcome": outcome}
    )
    return value or 0.0


def test_calls_are_counted_by_tool_and_outcome(counted):
    """An observed read and a rejected one are counted under the tool's ref."""
    h, metrics = counted
    assert h.run("echo", {"text": "hi"}).kind == "observed"
    assert h.run("echo", {"text": 1}).kind == "rejected"
    assert count(metrics, "echo@v1", "observed") == 1
    assert count(metrics, "echo@v1", "rejected") == 1
    assert b'toolbound_tool_call_duration_seconds_count{outcome="observed",tool="echo@v1"} 1.0' in (
        metrics.exposition()
    )


def test_a_name_the_model_made_up_is_counted_as_unknown(counted):
    """A proposal naming no registered tool never becomes a label of its own."""
    h, metrics = counted
    for n in range(5):
        h.run(f"invented_{n}", {"text": "x"})
    assert count(metrics, "unknown", "rejected") == 5
    assert b"invented" not in metrics.exposition()


def test_a_confirmed_call_is_counted_when_it_parks_and_when_it_ends(counted):
    """Parking answers awaiting_confirmation; the approved run answers observed."""
    h, metrics = counted
    parked = h.run("write", {"text": "x"})
    assert parked.kind == "awaiting_confirmation"
    assert count(metrics, "write@v1", "awaiting_confirmation") == 1
    done = h.runtime.approve(parked.invocation_id, digest=parked.request.digest, approver="ana")
    assert done.kind == "observed"
    assert count(metrics, "write@v1", "observed") == 1


def test_gauges_are_read_when_scraped(counted):
    """A surface's gauge is read at every scrape, with or without labels."""
    _, metrics = counted
    waiting = [3]
    metrics.gauge("pending_confirmations", "Calls waiting.", lambda: waiting[0])
    metrics.gauge(
        "upstream_up", "Upstreams answering.", lambda: {("git",): 1, ("time",): 0}, ("upstream",)
    )
    assert b"toolbound_pending_confirmations 3.0" in metrics.exposition()
    waiting[0] = 0
    text = metrics.exposition()
    assert b"toolbound_pending_confirmations 0.0" in text
    assert b'toolbound_upstream_up{upstream="git"} 1.0' in text


def _count_calls(calls: int) -> None:
    """In a process of its own: observe ``calls`` reads of echo@v1."""
    metrics = CallMetrics()
    for n in range(calls):
        call = f"call-{n}"
        metrics.emit(call, TraceEvent(0, 1.0, "proposal", State.PROPOSED, {}))
        metrics.emit(call, TraceEvent(1, 1.0, "transition", State.OBSERVED, {"spec": "echo@v1"}))
        metrics.emit(call, TraceEvent(2, 1.5, "tool_message", None, {}))


def test_processes_sharing_a_metrics_folder_are_scraped_as_one(tmp_path, monkeypatch):
    """Workers of one server count into one folder; any of them answers the sum."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    spawn = multiprocessing.get_context("spawn")
    for calls in (3, 4):
        worker = spawn.Process(target=_count_calls, args=(calls,))
        worker.start()
        worker.join(60)
        assert worker.exitcode == 0
    text = CallMetrics().exposition().decode()
    assert 'toolbound_tool_calls_total{outcome="observed",tool="echo@v1"} 7.0' in text
    assert 'toolbound_tool_call_duration_seconds_count{outcome="observed",tool="echo@v1"} 7.0' in (
        text
    )
