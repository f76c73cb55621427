"""R3 at the MCP transport: an error answers the request's id only when the id is unambiguous.

Raw HTTP bodies go to a gateway (uvicorn on loopback) and to ``toolbound mcp-serve
--http`` (a child process). A body that is not strict JSON is refused with a JSON-RPC
parse error before the SDK reads it; that error carries the request's ``id`` only
when the request object states it once. A request object with a key twice — two
ids, or two methods or params beside one id — reads two ways, so its error says
``"id": null`` (JSON-RPC 2.0: null when the id cannot be told).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest
from mcp_support import TOKENS, fault_upstream, gateway, grant, run, serving, write_config
from node_support import free_port, serving_command

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

HEADERS = {
    "Authorization": f"Bearer {TOKENS['mira']}",
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
}
CALL = b'"method":"tools/call","params":{"name":"fault.echo","arguments":{"text":"a"}}'

# (body, the id its error answers with, the parse gate's code)
CASES = [
    pytest.param(
        b'{"jsonrpc":"2.0","id":1,"id":2,' + CALL + b"}", None, "duplicate_key", id="two-ids"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":3,"id":3,' + CALL + b"}", None, "duplicate_key", id="one-id-twice"
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":4,"method":"tools/list",' + CALL + b"}",
        None,
        "duplicate_key",
        id="two-methods",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":"x",' + CALL + b',"params":{"name":"fault.fail"}}',
        None,
        "duplicate_key",
        id="two-params",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","jsonrpc":"2.0","id":5,' + CALL + b"}",
        None,
        "duplicate_key",
        id="two-versions",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":'
        b'{"name":"fault.echo","arguments":{"text":"a","text":"b"}}}',
        7,
        "duplicate_key",
        id="duplicate-in-arguments",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":"req-8","method":"tools/call","params":'
        b'{"name":"fault.echo","arguments":{"text":NaN}}}',
        "req-8",
        "non_finite_number",
        id="nan-in-arguments",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":true,"method":"tools/call","params":'
        b'{"name":"fault.echo","arguments":{"text":NaN}}}',
        None,
        "non_finite_number",
        id="boolean-id",
    ),
    pytest.param(
        b'{"jsonrpc":"2.0","id":{"a":1,"a":2},' + CALL + b"}",
        None,
        "duplicate_key",
        id="duplicate-inside-the-id",
    ),
]


def check(answer: httpx.Response, request_id: object, code: str) -> None:
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert "id" in error
    assert error["id"] == request_id
    assert error["error"]["code"] == -32700
    assert error["error"]["data"]["code"] == code


@pytest.fixture(scope="module")
def mcp_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``toolbound mcp-serve --http`` over the test notes, for the whole module."""
    folder = tmp_path_factory.mktemp("serve")
    config = write_config(folder, grant("mira", "notes:read"))
    port = free_port()
    args = ["mcp-serve", "--config", str(config.service.source), "--tools", "local_tools:tools",
            "--http", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with serving_command(args, port=port, env={"TOOLBOUND_TEST_NOTES": str(folder / "n.txt")}):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize(("body", "request_id", "code"), CASES)
def test_mcp_serve_answers_an_ambiguous_id_with_null(
    mcp_serve: str, body: bytes, request_id: object, code: str
) -> None:
    """mcp-serve: each refused body's error names its id only when the request states it once."""
    check(httpx.post(mcp_serve, content=body, headers=HEADERS, timeout=10), request_id, code)


def test_the_gateway_answers_an_ambiguous_id_with_null(tmp_path: Path, state: Path) -> None:
    """The gateway: the same bodies, the same ids; none of the calls reaches the upstream."""
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:read"))

    async def scenario() -> list[httpx.Response]:
        async with serving(gateway(config)) as url, httpx.AsyncClient() as http:
            return [
                await http.post(url, content=case.values[0], headers=HEADERS)  # type: ignore[arg-type]
                for case in CASES
            ]

    for case, answer in zip(CASES, run(scenario()), strict=True):
        _, request_id, code = case.values
        check(answer, request_id, code)  # type: ignore[arg-type]
    assert not (state / "calls.txt").exists()


def test_a_batch_with_two_ids_in_one_request_is_answered_with_null(mcp_serve: str) -> None:
    """A batch (MCP has none) is the SDK's to refuse: its error names no id either."""
    body = b'[{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/list"}]'
    answer = httpx.post(mcp_serve, content=body, headers=HEADERS, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["id"] is None
