"""The access log: one line per request, with who and what, and never a key or an argument."""

from __future__ import annotations

import io
import json
import logging
import re
from typing import TYPE_CHECKING

import httpx
import pytest
from click.testing import CliRunner
from servers import Server
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.cli import _cli
from toolbound.config import load_config
from toolbound.logs import configure
from toolbound.service.api import create_app
from toolbound.service.core import Service

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ARGUMENT = "argument-value-9f3c-never-logged"


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """The log as JSON lines in a buffer; the logging set-up restored after."""
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = configure("info", "json", stream=stream)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)
    for name in ("toolbound", "uvicorn", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.NOTSET)


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def _client(tmp_path: Path) -> TestClient:
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    return TestClient(create_app(Service(load_config(path))))


def _propose(client: TestClient, key: str, request_id: str) -> httpx.Response:
    return client.post(
        "/v1/proposals",
        json={
            "tool": "notes.shout",
            "arguments": json.dumps({"text": ARGUMENT}),
            "call_id": "c1",
        },
        headers={
            "Authorization": f"Bearer {key}",
            "Idempotency-Key": "k1",
            "X-Request-Id": request_id,
        },
    )


def test_a_proposal_is_one_line_naming_the_caller_route_status_and_invocation(
    tmp_path, effects_path, logs
):
    """The line: request id, principal, tenant, method, route, status, duration, invocation."""
    with _client(tmp_path) as client:
        answer = _propose(client, KEYS["agent"], "req-42")
        read = client.get(
            f"/v1/invocations/{answer.json()['invocation_id']}",
            headers={"Authorization": f"Bearer {KEYS['agent']}"},
        )
    assert answer.headers["x-request-id"] == "req-42"
    proposal, lookup = (line for line in _lines(logs) if line["logger"] == "toolbound.access")
    invocation = answer.json()["invocation_id"]
    assert {k: proposal[k] for k in proposal if k not in {"time", "duration_ms"}} == {
        "level": "info",
        "logger": "toolbound.access",
        "message": f"POST /v1/proposals {answer.status_code}",
        "request_id": "req-42",
        "principal": "agent",
        "tenant": "acme",
        "method": "POST",
        "route": "/v1/proposals",
        "status": answer.status_code,
        "invocation_id": invocation,
    }
    assert isinstance(proposal["duration_ms"], float)
    assert proposal["duration_ms"] >= 0
    assert lookup["route"] == "/v1/invocations/{invocation_id}"
    assert (lookup["invocation_id"], lookup["status"]) == (invocation, read.status_code)
    assert len(str(lookup["request_id"])) == 32  # none sent: a new one


def test_a_refused_request_is_logged_without_a_principal(tmp_path, effects_path, logs):
    """A wrong key: status 401, no principal, and the odd request id replaced by a new one."""
    with _client(tmp_path) as client:
        answer = _propose(client, "not-a-key", "bad id with spaces")
    (line,) = (line for line in _lines(logs) if line["logger"] == "toolbound.access")
    assert (line["status"], line["principal"], line["tenant"]) == (401, None, None)
    assert line["request_id"] == answer.headers["x-request-id"] != "bad id with spaces"


def test_no_key_secret_or_argument_value_reaches_any_log(tmp_path, effects_path, logs, caplog):
    """Every record of every logger, at debug, holds neither the API key nor the argument."""
    caplog.set_level(logging.DEBUG)
    with _client(tmp_path) as client:
        _propose(client, KEYS["agent"], "req-1")
        _propose(client, KEYS["agent"] + "-wrong", "req-2")
    written = logs.getvalue() + "\n".join(
        f"{r.getMessage()} {getattr(r, 'fields', '')}" for r in caplog.records
    )
    assert "req-1" in written  # the log was written
    for secret in (KEYS["agent"], ARGUMENT, "Bearer"):
        assert secret not in written


def test_without_logging_configured_the_app_is_untouched(tmp_path, effects_path):
    """The access logger off: no line, no X-Request-Id added, nothing in the way."""
    with _client(tmp_path) as client:
        answer = _propose(client, KEYS["agent"], "req-42")
    assert answer.status_code < 300
    assert "x-request-id" not in answer.headers


def test_text_lines_carry_the_same_fields_as_key_value_pairs(tmp_path, effects_path, logs):
    """With `format = "text"`: one line, the fields as key=value after the message."""
    configure("info", "text", stream=logs)
    with _client(tmp_path) as client:
        _propose(client, KEYS["agent"], "req-7")
    (line,) = [x for x in logs.getvalue().splitlines() if "toolbound.access" in x]
    for pair in ("request_id=req-7", "principal=agent", "tenant=acme", "route=/v1/proposals"):
        assert pair in line
    assert ARGUMENT not in line


def test_logging_keys_are_checked(tmp_path):
    """[logging] level and format take only their listed values."""
    path = tmp_path / "toolbound.toml"
    path.write_text(
        config_text("sqlite:///toolbound.db")
        + '\n[logging]\nlevel = "loud"\nformat = "xml"\ncolour = true\n'
    )
    result = CliRunner().invoke(_cli, ["check-config", str(path), "--json"])
    assert result.exit_code == 1
    paths = {p["path"] for p in json.loads(result.stdout)["problems"]}
    assert paths == {"logging.level", "logging.format", "logging.colour"}


def test_serve_writes_json_access_lines_at_the_level_asked(tmp_path, effects_path):
    """`toolbound serve --log-level info` with format json: a line per request on stderr."""
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db") + '\n[logging]\nformat = "json"\n')
    log = tmp_path / "serve.log"
    server = Server(path, env={}, log=log, log_level="info").start()
    try:
        answer = httpx.get(f"{server.url}/v1/unknown", headers={"X-Api-Key": KEYS["ops"]})
    finally:
        server.stop()
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
    access = [x for x in lines if x["logger"] == "toolbound.access"]
    assert {x["route"] for x in access} >= {"/healthz", "/v1/unknown"}
    unknown = next(x for x in access if x["route"] == "/v1/unknown")
    assert (unknown["status"], unknown["principal"]) == (answer.status_code, "ops")
    assert KEYS["ops"] not in log.read_text()


def test_a_console_page_is_logged_with_the_person_signed_in(tmp_path, effects_path, logs):
    """The console's requests name the principal of the session, and the page's route."""
    with _client(tmp_path) as client:
        page = client.get("/console/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf is not None
        client.post("/console/login", data={"key": KEYS["ana"], "csrf": csrf.group(1)})
        client.get("/console/pending")
    access = [line for line in _lines(logs) if line["logger"] == "toolbound.access"]
    pending = next(line for line in access if line["route"] == "/console/pending")
    assert (pending["principal"], pending["tenant"], pending["status"]) == ("ana", "acme", 200)
    assert KEYS["ana"] not in logs.getvalue()
