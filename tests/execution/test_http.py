"""HttpTool against a real HTTP server on loopback (R8, R9, R10, R14).

The server is the standard library's ThreadingHTTPServer on 127.0.0.1 with an
ephemeral port, started afresh for each test. Its "shop" keeps an orders table and
de-duplicates writes by Idempotency-Key, so a retry after a lost response can be
shown to return the original result with one side effect.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
from shop import DELAY, LOOPBACK

from toolbound._clock import FixedClock
from toolbound._errors import ConfigurationError
from toolbound._model import Invocation, Subject
from toolbound.execution.http import (
    HttpRequest,
    HttpTool,
    KeyCommitted,
    KeyNotFound,
    KeyUnknown,
    classify_status,
    error_text,
    parse_retry_after,
    traceparent,
    transport_failure,
)
from toolbound.execution.retry import (
    AuthFailed,
    BusinessRejection,
    MaybeCommitted,
    NoResponse,
    NotReached,
    ResponseLost,
    RetryPolicy,
    Transient,
    classify,
    decide,
    retry_after_of,
)
from toolbound.execution.tool import CommitUnknown, NotCommitted, ToolContext, ToolOutput

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TOKEN = "tok-7f3a9c1e5b2d4f60a8e1"  # noqa: S105 - a test credential, sent to loopback only
KEY = "idem-key-0001"
DEADLINE = 0.1  # clients give up after this; the server's slow routes take DELAY
W3C_TRACEPARENT = re.compile(r"^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$")
NOW = datetime(2026, 7, 19, 6, 0, tzinfo=UTC)
MIRA = Subject(id="mira", tenant="acme", session="s-1")


@pytest.fixture
def closed_port():
    """A loopback port that is bound but not listening: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(params=["sync", "async"])
def call(request):
    """Runs a tool through __call__ or through acall on a fresh event loop."""
    if request.param == "sync":
        return lambda tool, arguments, ctx: tool(arguments, ctx)
    return lambda tool, arguments, ctx: asyncio.run(tool.acall(arguments, ctx))


@pytest.fixture(params=["sync", "async"])
def ask(request):
    """Runs HttpTool.query or HttpTool.aquery."""
    if request.param == "sync":
        return lambda tool, key, **kw: tool.query(key, **kw)
    return lambda tool, key, **kw: asyncio.run(tool.aquery(key, **kw))


def context(
    *,
    key: str | None = KEY,
    deadline: float = 2.0,
    secrets: dict[str, str] | None = None,
    trace_id: str = TRACE_ID,
    attempt: int = 1,
) -> ToolContext:
    invocation = Invocation(
        invocation_id="inv-1",
        proposal_id="call_1",
        model_call_id=None,
        tool_name="create_order",
        tool_version="v1",
        arguments={},
        canonical=b"{}",
        digest="sha256:0",
        subject=MIRA,
        granted_capabilities=frozenset({"orders:write"}),
        resources=(),
        idempotency_key=key,
        deadline=NOW + timedelta(seconds=deadline),
        trace_id=trace_id,
    )
    return ToolContext(
        invocation=invocation,
        attempt=attempt,
        secrets={"shop_token": TOKEN} if secrets is None else secrets,
        idempotency_key=key,
        deadline_in=deadline,
    )


def create_order(base: str, **overrides) -> HttpTool:
    fields = {
        "method": "POST",
        "url": f"{base}/orders",
        "effect": "irreversible_write",
        "bearer_secret": "shop_token",
        "resource_id_field": "id",
        "query_url": f"{base}/ops/{{key}}",
        "egress": LOOPBACK,
    } | overrides
    return HttpTool(**fields)


def status_tool(base: str, status: int, *, effect: str = "irreversible_write", **kw) -> HttpTool:
    method = "GET" if effect == "read" else "POST"
    return HttpTool(
        method=method, url=f"{base}/status/{status}", effect=effect, egress=LOOPBACK, **kw
    )


ORDER = {"sku": "A-104", "qty": 2}

# -- success and what goes on the wire ------------------------------------------------


def test_created_order_is_a_committed_output(shop, call):
    """A 201 returns the JSON body, the resource id, and marks the commit boundary."""
    ctx = context()
    out = call(create_order(shop.base), ORDER, ctx)
    assert out == ToolOutput(
        value={"id": "ord-1", "sku": "A-104", "qty": 2, "status": "placed"},
        external_resource_id="ord-1",
    )
    assert ctx.committed
    assert json.loads(shop.seen[0].body) == ORDER
    assert shop.seen[0].headers["content-type"] == "application/json"


def test_location_header_is_the_resource_id_without_a_field(shop, call):
    """Without resource_id_field the Location header names what was created."""
    out = call(create_order(shop.base, resource_id_field=None), ORDER, context())
    assert out.external_resource_id == f"{shop.base}/orders/ord-1"


def test_idempotency_key_and_traceparent_are_passed_on(shop, call):
    """The server sees the invocation's key and a W3C traceparent with its trace id."""
    call(create_order(shop.base), ORDER, context())
    call(create_order(shop.base), ORDER, context(key="idem-key-0002"))
    first, second = shop.seen
    assert first.headers["idempotency-key"] == KEY
    for seen in (first, second):
        parent = seen.headers["traceparent"]
        assert W3C_TRACEPARENT.fullmatch(parent), parent
        assert parent.split("-")[1] == TRACE_ID
    # A fresh span id per request, the same trace.
    assert first.headers["traceparent"] != second.headers["traceparent"]


def test_no_key_means_no_idempotency_header(shop, call):
    """A call without a key sends no Idempotency-Key at all (never an empty one)."""
    call(create_order(shop.base), ORDER, context(key=None))
    assert "idempotency-key" not in shop.seen[0].headers


def test_path_and_query_come_from_the_arguments(shop, call):
    """Path placeholders are percent-encoded; the rest of a GET's arguments go to the query."""
    tool = HttpTool(
        method="GET", url=f"{shop.base}/orders/{{order_id}}", effect="read", egress=LOOPBACK
    )
    with pytest.raises(BusinessRejection):
        call(tool, {"order_id": "a b/c", "verbose": True, "tags": ["x", "y"]}, context())
    seen = shop.seen[0]
    assert seen.path == "/orders/a%20b%2Fc"
    assert seen.query == "verbose=true&tags=x&tags=y"
    assert seen.body == b""


def test_query_string_in_the_template_is_kept(shop, call):
    """A query written into the URL template stays, and argument parameters are added."""
    tool = HttpTool(
        method="GET", url=f"{shop.base}/orders/{{order_id}}?v=2", effect="read", egress=LOOPBACK
    )
    with pytest.raises(BusinessRejection, match="no such order"):
        call(tool, {"order_id": "ord-9", "verbose": False}, context())
    assert shop.seen[0].query == "v=2&verbose=false"


@pytest.mark.parametrize("bad", ["..", ".", ""])
def test_dot_segments_in_the_path_are_refused_before_sending(shop, call, bad):
    """'..' would reach another resource, so it is refused and nothing is sent."""
    tool = HttpTool(
        method="GET", url=f"{shop.base}/orders/{{order_id}}", effect="read", egress=LOOPBACK
    )
    with pytest.raises(NotCommitted) as caught:
        call(tool, {"order_id": bad}, context())
    assert caught.value.code == "invalid_argument"
    assert shop.seen == []


def test_bearer_secret_is_sent_but_never_returned(shop, call):
    """The token reaches the server, yet the output the tool returns holds no trace of it."""
    tool = HttpTool(
        method="GET",
        url=f"{shop.base}/echo-auth",
        effect="read",
        bearer_secret="shop_token",  # noqa: S106 - the secret's name, not its value
        egress=LOOPBACK,
    )
    out = call(tool, {}, context())
    assert shop.seen[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in json.dumps(out.value)
    assert TOKEN not in repr(out)
    assert out.value == {"you_sent": "Bearer [redacted:secret]", "ok": True}


def test_secret_headers_and_hook(shop, call):
    """secret_headers carry API keys; build_request can add anything, after the standard ones."""

    def sign(request: HttpRequest, arguments, ctx) -> HttpRequest:
        assert request.headers["Idempotency-Key"] == KEY
        headers = {**request.headers, "X-Signature": f"sig:{len(request.content or b'')}"}
        return HttpRequest(
            method=request.method,
            url=request.url,
            params=request.params,
            headers=headers,
            content=request.content,
        )

    tool = create_order(
        shop.base,
        bearer_secret=None,
        secret_headers={"X-Api-Key": "shop_token"},
        build_request=sign,
    )
    call(tool, ORDER, context())
    headers = shop.seen[0].headers
    assert headers["x-api-key"] == TOKEN
    assert headers["x-signature"] == f"sig:{len(shop.seen[0].body)}"
    assert "authorization" not in headers


def test_missing_secret_fails_before_sending(shop, call):
    """A credential the context lacks is a failure before commit; nothing is sent."""
    with pytest.raises(NotCommitted) as caught:
        call(create_order(shop.base), ORDER, context(secrets={}))
    assert caught.value.code == "secret_unavailable"
    assert caught.value.recoverable is False
    assert shop.seen == []


def test_injected_clients_are_used_and_left_open(shop):
    """Long-lived clients passed in are reused for every call and never closed by the tool."""

    async def run_async(tool: HttpTool) -> ToolOutput:
        async with httpx.AsyncClient() as client:
            out = await replace(tool, async_client=client).acall(ORDER, context(key="k-async"))
            assert not client.is_closed
            return out

    with httpx.Client() as client:
        tool = create_order(shop.base, client=client)
        tool(ORDER, context(key="k-1"))
        tool(ORDER, context(key="k-2"))
        assert not client.is_closed
    asyncio.run(run_async(create_order(shop.base)))
    assert len(shop.orders) == 3


# -- failures mapped onto the matrix ----------------------------------------------------


def test_429_with_retry_after_seconds_is_transient(shop, call):
    """429 + Retry-After: 1 → Transient carrying retry_after=1.0; the matrix backs off."""
    shop.extra_headers["Retry-After"] = "1"
    with pytest.raises(Transient) as caught:
        call(status_tool(shop.base, 429), ORDER, context())
    exc = caught.value
    assert (exc.status, exc.retry_after) == (429, 1.0)
    assert "slow down" in exc.message
    decision = decide(
        classify(exc),
        "unkeyed_write",
        attempt=1,
        policy=RetryPolicy(),
        remaining=3.0,
        retry_after=retry_after_of(exc),
        rng=lambda: 0.5,
    )
    assert (decision.action, decision.delay) == ("retry", 1.0)


def test_429_whose_retry_after_does_not_fit_stops(shop, call):
    """Seed 42.4 on the wire: Retry-After 1 with half a second left → stop."""
    shop.extra_headers["Retry-After"] = "1"
    ctx = context(deadline=0.5)
    with pytest.raises(Transient) as caught:
        call(status_tool(shop.base, 429, effect="read"), {}, ctx)
    decision = decide(
        "transient",
        "read",
        attempt=1,
        policy=RetryPolicy(),
        remaining=ctx.deadline_in,
        retry_after=caught.value.retry_after,
        rng=lambda: 0.5,
    )
    assert decision.action == "stop"


def test_429_with_retry_after_http_date(shop, call):
    """An HTTP-date Retry-After becomes seconds from the tool's clock."""
    shop.extra_headers["Retry-After"] = format_datetime(NOW + timedelta(seconds=2), usegmt=True)
    tool = status_tool(shop.base, 429, clock=FixedClock(NOW))
    with pytest.raises(Transient) as caught:
        call(tool, ORDER, context())
    assert caught.value.retry_after == 2.0


def test_503_is_transient_even_for_a_write(shop, call):
    """503 means the server did no work: Transient, so even an unkeyed write may retry."""
    with pytest.raises(Transient) as caught:
        call(status_tool(shop.base, 503), ORDER, context())
    assert (caught.value.status, caught.value.retry_after) == (503, None)
    assert classify(caught.value) == "transient"


@pytest.mark.parametrize("status", [500, 502, 504])
def test_5xx_on_a_write_may_have_committed(shop, call, status):
    """500/502/504 on a write → MaybeCommitted (commit unknown), with the key as evidence."""
    with pytest.raises(MaybeCommitted) as caught:
        call(status_tool(shop.base, status), ORDER, context())
    exc = caught.value
    assert isinstance(exc, CommitUnknown)
    assert exc.status == status
    assert exc.evidence["idempotency_key"] == KEY
    assert exc.evidence["trace_id"] == TRACE_ID
    assert classify(exc) == "maybe_committed"


def test_5xx_on_a_read_is_just_transient(shop, call):
    """A read commits nothing, so its 500 is Transient, retried with backoff."""
    with pytest.raises(Transient) as caught:
        call(status_tool(shop.base, 500, effect="read"), {}, context())
    assert caught.value.status == 500


@pytest.mark.parametrize("status", [401, 403])
def test_401_and_403_are_auth_failures_never_retried(shop, call, status):
    """401/403 → AuthFailed, not recoverable, and the matrix stops in every column."""
    with pytest.raises(AuthFailed) as caught:
        call(status_tool(shop.base, status), ORDER, context())
    exc = caught.value
    assert (exc.status, exc.recoverable, exc.code) == (status, False, "auth_failed")
    assert TOKEN not in exc.message
    decision = decide(
        "auth",
        "keyed_write",
        attempt=1,
        policy=RetryPolicy(),
        remaining=9,
        retry_after=None,
        rng=lambda: 0.5,
    )
    assert decision.action == "stop"


def test_422_carries_the_service_text_for_the_model(shop, call):
    """A business 4xx → BusinessRejection whose message is the service's own explanation."""
    with pytest.raises(BusinessRejection) as caught:
        call(status_tool(shop.base, 422), ORDER, context())
    exc = caught.value
    assert exc.status == 422
    assert exc.message.endswith(": quantity must be a positive integer")
    assert exc.recoverable is True
    assert "new call" in (exc.hint or "")


def test_long_error_text_is_trimmed_to_one_line(shop, call):
    """The service's text is collapsed to one line and cut at error_text_limit."""
    tool = HttpTool(
        method="POST",
        url=f"{shop.base}/long-error",
        effect="read",
        error_text_limit=40,
        egress=LOOPBACK,
    )
    with pytest.raises(BusinessRejection) as caught:
        call(tool, {}, context())
    said = caught.value.message.split(": ", 1)[1]
    assert said == "bad request " + "x" * 27 + "\u2026"
    assert len(said) == 40


def test_connection_refused_is_not_reached(call, closed_port):
    """A refused connection provably reached nothing: NotReached, retried even unkeyed."""
    tool = create_order(f"http://127.0.0.1:{closed_port}")
    with pytest.raises(NotReached) as caught:
        call(tool, ORDER, context())
    assert isinstance(caught.value, NotCommitted)
    decision = decide(
        classify(caught.value),
        "unkeyed_write",
        attempt=1,
        policy=RetryPolicy(),
        remaining=2.0,
        retry_after=None,
        rng=lambda: 0.5,
    )
    assert decision.action == "retry"


def test_response_timeout_on_a_write_is_commit_unknown(shop, call):
    """The server commits, then answers too late: ResponseLost, and the write did happen."""
    shop.plan.append("slow")
    with pytest.raises(ResponseLost) as caught:
        call(create_order(shop.base), ORDER, context(deadline=DEADLINE))
    assert not shop.late_answer_sent.is_set()  # we did not wait for the late answer
    assert caught.value.evidence["error"] == "ReadTimeout"
    # R9: timed out is not "not executed" (on a loaded machine the server may commit
    # only after the client gave up: wait for it, well within its own delay).
    assert shop.committed.wait(timeout=10 * DELAY)
    assert list(shop.orders) == ["ord-1"]
    decision = decide(
        classify(caught.value),
        "unkeyed_write",
        attempt=1,
        policy=RetryPolicy(),
        remaining=5.0,
        retry_after=None,
        rng=lambda: 0.5,
    )
    assert decision.action == "unknown"


def test_response_timeout_on_a_read_is_no_response(shop, call):
    """A read that times out is a plain failure before commit, re-readable within budget."""
    tool = HttpTool(method="GET", url=f"{shop.base}/slow", effect="read", egress=LOOPBACK)
    with pytest.raises(NoResponse) as caught:
        call(tool, {}, context(deadline=DEADLINE))
    assert not isinstance(caught.value, CommitUnknown)
    assert classify(caught.value) == "timeout_unknown"


def test_response_dropped_after_commit_then_keyed_retry_is_deduplicated(shop, call):
    """Server commits then hangs up: ResponseLost; a retry with the same key replays, one effect."""
    shop.plan.append("drop")
    tool = create_order(shop.base)
    with pytest.raises(ResponseLost) as caught:
        call(tool, ORDER, context(attempt=1))
    # The server's own table: the write happened, under the invocation's key.
    assert list(shop.orders) == ["ord-1"]
    assert shop.seen[0].headers["idempotency-key"] == KEY
    assert caught.value.evidence["idempotency_key"] == KEY
    assert caught.value.evidence["error"] == "RemoteProtocolError"

    decision = decide(
        classify(caught.value),
        "keyed_write",
        attempt=1,
        policy=RetryPolicy(),
        remaining=2.0,
        retry_after=None,
        rng=lambda: 0.0,
    )
    assert decision.action == "retry"
    retried = call(tool, ORDER, context(attempt=2))
    assert retried == ToolOutput(
        value={"id": "ord-1", "sku": "A-104", "qty": 2, "status": "placed"},
        external_resource_id="ord-1",
    )
    assert len(shop.orders) == 1  # one side effect
    assert [s.headers["idempotency-key"] for s in shop.seen] == [KEY, KEY]


def test_deadline_already_passed_sends_nothing(shop, call):
    """With no time left the request is not sent: a failure before commit."""
    with pytest.raises(NotCommitted) as caught:
        call(create_order(shop.base), ORDER, context(deadline=0.0))
    assert caught.value.code == "deadline_exceeded"
    assert shop.seen == []


# -- query by key -----------------------------------------------------------------------


def test_query_reports_a_committed_key_with_its_result(shop, ask):
    """After a lost response, asking by key returns the stored result (R9 reconciliation)."""
    shop.plan.append("drop")
    tool = create_order(shop.base)
    with pytest.raises(ResponseLost):
        tool(ORDER, context())
    answer = ask(tool, KEY, secrets={"shop_token": TOKEN}, trace_id=TRACE_ID)
    assert answer == KeyCommitted(
        value={"id": "ord-1", "sku": "A-104", "qty": 2, "status": "placed"},
        external_resource_id="ord-1",
    )
    asked = shop.seen[-1]
    assert (asked.method, asked.path) == ("GET", f"/ops/{KEY}")
    assert asked.headers["authorization"] == f"Bearer {TOKEN}"
    assert asked.headers["traceparent"].split("-")[1] == TRACE_ID


def test_query_unknown_key_is_not_found(shop, ask):
    """A key the service never saw is KeyNotFound: nothing committed."""
    answer = ask(create_order(shop.base), "never-sent", secrets={"shop_token": TOKEN})
    assert answer == KeyNotFound(status=404)


def test_query_that_cannot_get_an_answer_is_unknown(shop, ask, closed_port):
    """A busy service or an unreachable one leaves the key unknown, without raising."""
    busy = ask(create_order(shop.base), "busy", secrets={"shop_token": TOKEN})
    assert isinstance(busy, KeyUnknown)
    assert "503" in busy.reason
    gone = ask(create_order(f"http://127.0.0.1:{closed_port}"), KEY, secrets={"shop_token": TOKEN})
    assert gone == KeyUnknown(reason="the service could not be asked (ConnectError)")


def test_query_needs_a_query_url():
    """Asking without a configured query_url is a configuration error."""
    tool = HttpTool(method="POST", url="http://127.0.0.1:9/orders", effect="reversible_write")
    with pytest.raises(ConfigurationError, match="query_url"):
        tool.query(KEY)


# -- pure parts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "write", "expected"),
    [
        (200, True, None),
        (201, True, None),
        (204, False, None),
        (408, True, "transient"),
        (425, True, "transient"),
        (429, True, "transient"),
        (503, True, "transient"),
        (500, True, "maybe_committed"),
        (502, True, "maybe_committed"),
        (504, True, "maybe_committed"),
        (507, True, "maybe_committed"),
        (500, False, "transient"),
        (504, False, "transient"),
        (501, True, "business"),
        (505, False, "business"),
        (401, False, "auth"),
        (403, True, "auth"),
        (400, True, "business"),
        (404, False, "business"),
        (409, True, "business"),
        (422, True, "business"),
        (302, True, "business"),
    ],
    ids=str,
)
def test_classify_status(status, write, expected):
    """Each HTTP status lands in the class docs/retries.md gives it."""
    assert classify_status(status, write=write) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("1", 1.0),
        (" 120 ", 120.0),
        ("Sun, 19 Jul 2026 06:00:05 GMT", 5.0),
        ("Sun, 19 Jul 2026 05:59:00 GMT", 0.0),
        ("soon", None),
        ("-1", None),
        ("1.5", None),
    ],
)
def test_parse_retry_after(value, expected):
    """Delay-seconds and HTTP-dates parse; past dates are 0; anything else is ignored."""
    assert parse_retry_after(value, now=NOW) == expected


def test_traceparent_format():
    """A traceparent is 00, the trace id, a 16-hex span id, sampled; a bad trace id gives none."""
    parent = traceparent(TRACE_ID)
    assert parent is not None
    assert W3C_TRACEPARENT.fullmatch(parent)
    assert traceparent(TRACE_ID.upper(), "00f067aa0ba902b7") == (
        f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    )
    assert traceparent("0" * 32) is None
    assert traceparent("not-a-trace-id") is None


def test_invalid_trace_id_sends_no_traceparent(shop, call):
    """A trace id that is not W3C-shaped is not forwarded: no header at all."""
    call(create_order(shop.base), ORDER, context(trace_id="run-42"))
    assert "traceparent" not in shop.seen[0].headers


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://127.0.0.1/orders")


@pytest.mark.parametrize(
    ("exc", "write", "expected"),
    [
        (httpx.ConnectError("refused", request=_request()), True, NotReached),
        (httpx.ConnectError("[Errno -2] Name or service not known"), True, NotReached),
        (httpx.ConnectTimeout("slow connect"), True, NotReached),
        (httpx.PoolTimeout("pool"), True, NotReached),
        (httpx.ProxyError("proxy"), True, NotReached),
        (httpx.ReadTimeout("late"), True, ResponseLost),
        (httpx.WriteTimeout("stalled"), True, ResponseLost),
        (httpx.ReadError("reset"), True, ResponseLost),
        (httpx.RemoteProtocolError("hung up"), True, ResponseLost),
        (httpx.ReadTimeout("late"), False, NoResponse),
        (httpx.RemoteProtocolError("hung up"), False, NoResponse),
        (httpx.UnsupportedProtocol("ftp"), True, NotCommitted),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_transport_failure(exc, write, expected):
    """Only failures before a byte left are NotReached; later ones are unknown for writes."""
    signal = transport_failure(exc, write=write)
    assert type(signal) is expected


def test_error_text_finds_the_explanation():
    """Common error shapes yield their message; other bodies fall back to one line of text."""
    assert error_text(b'{"error": {"message": "token expired"}}') == "token expired"
    assert error_text(b'{"detail": [{"loc": ["qty"], "msg": "x"}]}') == (
        '[{"loc":["qty"],"msg":"x"}]'
    )
    assert error_text(b"<h1>Bad\n   Request</h1>") == "<h1>Bad Request</h1>"
    assert error_text(b"abcdef", limit=4) == "abc\u2026"
    assert error_text(b"") == ""


def test_request_repr_hides_header_values():
    """A request's repr names its headers but never prints a credential."""
    request = HttpRequest(method="GET", url="http://x/", headers={"Authorization": "Bearer s3"})
    assert "s3" not in repr(request)
    assert "Authorization" in repr(request)


@pytest.mark.parametrize(
    "fields",
    [
        {"method": "TRACE", "url": "http://x/a"},
        {"method": "GET", "url": "http://x/{id!r}"},
        {"method": "GET", "url": "http://x/{id}", "query_args": ("id",)},
        {"method": "GET", "url": "http://x/", "query_url": "http://x/ops"},
    ],
    ids=["method", "placeholder", "clash", "query_url"],
)
def test_bad_configuration_is_refused(fields):
    """A tool that could never send a sensible request fails at construction."""
    with pytest.raises(ConfigurationError):
        HttpTool(effect="read", **fields)
