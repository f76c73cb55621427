"""R10 in the runtime: the matrix decides, attempts are traced, keys stay the same."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from shop import LOOPBACK

from harness import Harness, grant, spec
from toolbound._state import State
from toolbound.execution.http import HttpTool
from toolbound.execution.reconcile import RemoteCommitted, RemoteNotCommitted
from toolbound.execution.retry import (
    AuthFailed,
    BusinessRejection,
    FakeSleeper,
    MaybeCommitted,
    NotReached,
    ResponseLost,
    RetryPolicy,
    Transient,
)

S = State


class Script:
    """A tool that does, on each call, the next thing in its script."""

    def __init__(self, *steps):
        self.steps = list(steps)
        self.keys: list[str | None] = []

    def __call__(self, _args, ctx):
        self.keys.append(ctx.idempotency_key)
        step = self.steps.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step


OK = {"text": "ok"}


@pytest.fixture
def h(clock):
    sleeper = FakeSleeper(clock)
    harness = Harness(
        clock,
        sleeper=sleeper,
        rng=lambda: 0.5,
        retry_policy=RetryPolicy(base_delay=0.1, max_delay=1.0),
    )
    harness.sleeper = sleeper
    yield harness
    harness.close()


READ = {"effect": "read"}
UNKEYED = {"effect": "reversible_write", "idempotency": "none"}
KEYED = {"effect": "reversible_write", "idempotency": "native_key"}
QUERYABLE = {"effect": "reversible_write", "idempotency": "query_by_key"}

# (name, spec overrides, script, expected kind, expected tool calls)
REFUSED, BUSY = NotReached("refused"), Transient("busy", status=503)
HTTP_500, LOST = MaybeCommitted("x", status=500), ResponseLost("lost")
UNKNOWN = "outcome_unknown"
CASES = [
    ("not_reached read, then ok", READ, [REFUSED, OK], "observed", 2),
    ("not_reached unkeyed write, then ok", UNKEYED, [REFUSED, OK], "observed", 2),
    ("transient keyed write, then ok", KEYED, [BUSY, OK], "observed", 2),
    ("auth never retried", READ, [AuthFailed("expired", status=401), OK], "failed", 1),
    ("business never retried", KEYED, [BusinessRejection("bad", status=422), OK], "failed", 1),
    ("500 on unkeyed write is unknown", UNKEYED, [HTTP_500], UNKNOWN, 1),
    ("500 on keyed write retried, same key", KEYED, [HTTP_500, OK], "observed", 2),
    ("lost response, unkeyed write: unknown", UNKEYED, [LOST], UNKNOWN, 1),
    ("lost response, keyed write: same key again", KEYED, [LOST, OK], "observed", 2),
    ("three failures exhaust three attempts", READ, [REFUSED, REFUSED, REFUSED], "failed", 3),
]


@pytest.mark.parametrize(
    ("overrides", "steps", "kind", "calls"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_matrix_through_the_runtime(h, overrides, steps, kind, calls):
    """Each failure class, per key reliability, gets R10's treatment end to end."""
    tool = Script(*steps)
    h.registry.register(spec("t", max_attempts=3, capabilities=("test:use",), **overrides), tool)
    out = h.run("t", {"text": "x"})
    assert out.kind == kind
    assert len(tool.keys) == calls
    assert len(set(tool.keys)) == 1  # the same key on every attempt
    assert len(out.trace.of_kind("attempt")) == calls
    result = out.result
    assert [a.number for a in result.attempts] == list(range(1, calls + 1))
    assert len({a.attempt_id for a in result.attempts}) == calls
    assert len(h.sleeper.slept) == calls - 1


def test_retry_after_honoured_when_it_fits(h):
    """Retry-After within the deadline is waited for exactly."""
    tool = Script(Transient("slow down", status=429, retry_after=0.7), OK)
    h.registry.register(spec("t", max_attempts=2, timeout=5.0), tool)
    out = h.run("t", {"text": "x"})
    assert out.kind == "observed"
    assert h.sleeper.slept == [0.7]


def test_retry_after_past_the_deadline_stops(h):
    """Retry-After longer than the time left: no retry (seed 42.4)."""
    tool = Script(Transient("slow down", status=429, retry_after=3.0), OK)
    h.registry.register(spec("t", max_attempts=2, timeout=1.0), tool)
    out = h.run("t", {"text": "x"})
    assert out.kind == "failed"
    assert h.sleeper.slept == []
    (decision,) = out.trace.of_kind("retry_decision")
    assert decision.data["action"] == "stop"


def test_queryable_write_asks_before_retrying_found(h):
    """A lost response on a query_by_key write: the remote says committed; no second call."""
    tool = Script(ResponseLost("lost"))
    asked = []

    def query(call):
        asked.append(call.idempotency_key)
        return RemoteCommitted(value=OK, evidence={"found": True})

    h.registry.register(spec("t", max_attempts=3, query=query, **QUERYABLE), tool)
    out = h.run("t", {"text": "x"})
    assert out.kind == "observed"
    assert out.result.value == OK
    assert asked == tool.keys
    assert len(tool.keys) == 1
    assert out.trace.of_kind("query")[0].data["answer"] == "committed"


def test_queryable_write_asks_before_retrying_absent(h):
    """The remote says it never happened: then, and only then, the call runs again."""
    tool = Script(ResponseLost("lost"), OK)
    h.registry.register(
        spec("t", max_attempts=3, query=lambda c: RemoteNotCommitted(), **QUERYABLE), tool
    )
    out = h.run("t", {"text": "x"})
    assert out.kind == "observed"
    assert len(tool.keys) == 2


def test_deadline_timeout_of_read_is_retried(clock):
    """A read that overruns one attempt's share is retried within the deadline."""
    h = Harness(clock, retry_policy=RetryPolicy(base_delay=0.0, max_delay=0.0))
    calls = []

    def slow_then_fast(_args, _ctx):
        calls.append(1)
        if len(calls) == 1:
            raise REFUSED
        return OK

    h.registry.register(spec("t", max_attempts=2, timeout=2.0), slow_then_fast)
    out = h.run("t", {"text": "x"})
    h.close()
    assert out.kind == "observed"
    assert len(calls) == 2


# -- through HTTP, against the loopback shop --------------------------------------


def order_spec(shop, **kw):
    tool = HttpTool(
        method="POST",
        url=f"{shop.base}/orders",
        effect="irreversible_write",
        resource_id_field="id",
        query_url=f"{shop.base}/ops/{{key}}",
        egress=LOOPBACK,
    )
    return spec(
        "order",
        effect="irreversible_write",
        input_schema={
            "type": "object",
            "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            "required": ["sku", "qty"],
            "additionalProperties": False,
        },
        output_schema=None,
        max_attempts=3,
        timeout=3.0,
        **kw,
    ), tool


def test_http_lost_response_retried_with_same_key_one_effect(h, shop):
    """The shop commits, drops the response; the retry carries the same key: one order."""
    shop.plan.append("drop")
    s, tool = order_spec(shop, idempotency="native_key")
    h.grants.append(grant(capability="test:use"))
    h.registry.register(s, tool)
    out = h.run("order", {"sku": "A-104", "qty": 2})
    assert out.kind == "observed"
    assert len(shop.orders) == 1
    posts = [r for r in shop.seen if r.method == "POST"]
    assert len(posts) == 2
    assert posts[0].headers["idempotency-key"] == posts[1].headers["idempotency-key"]
    assert posts[0].headers["idempotency-key"] == out.invocation.idempotency_key
    assert out.result.external_resource_id == "ord-1"
    tp = posts[0].headers["traceparent"]
    assert tp.split("-")[1] == out.invocation.trace_id


def test_http_lost_response_unkeyed_is_unknown(h, shop):
    """Without a reliable key the same loss is OUTCOME_UNKNOWN: no blind retry."""
    shop.plan.append("drop")
    s, tool = order_spec(shop, idempotency="none")
    h.registry.register(s, tool)
    out = h.run("order", {"sku": "A-104", "qty": 2})
    assert out.kind == "outcome_unknown"
    assert len([r for r in shop.seen if r.method == "POST"]) == 1
    assert len(shop.orders) == 1


def test_http_429_backs_off_then_succeeds(h, shop):
    """429 with Retry-After: the runtime waits as told, then the order goes through once."""
    shop.plan.append("fail:429")
    shop.extra_headers["Retry-After"] = "1"
    s, tool = order_spec(shop, idempotency="native_key")
    h.registry.register(s, tool)
    out = h.run("order", {"sku": "A-104", "qty": 1})
    assert out.kind == "observed"
    assert h.sleeper.slept == [1.0]
    assert len(shop.orders) == 1


def test_http_lost_response_queryable_asks_the_shop(h, shop):
    """query_by_key: after a lost response the runtime asks /ops/{key} and finds the order."""
    shop.plan.append("drop")
    s, tool = order_spec(shop, idempotency="query_by_key")

    def query(call):
        answer = tool.query(call.idempotency_key)
        if answer.kind == "committed":
            return RemoteCommitted(
                value=answer.value, external_resource_id=answer.external_resource_id
            )
        if answer.kind == "not_found":
            return RemoteNotCommitted()
        msg = "unknown"
        raise RuntimeError(msg)

    h.registry.register(spec_with_query(s, query), tool)
    out = h.run("order", {"sku": "A-104", "qty": 2})
    assert out.kind == "observed"
    assert len([r for r in shop.seen if r.method == "POST"]) == 1
    assert [unquote(r.path) for r in shop.seen if r.method == "GET"] == [
        f"/ops/{out.invocation.idempotency_key}"
    ]
    assert out.result.value["id"] == "ord-1"


def spec_with_query(s, query):
    from dataclasses import replace

    return replace(s, query=query)
