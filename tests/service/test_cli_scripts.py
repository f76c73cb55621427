"""The CLI's reading commands in a script: one JSON document each, nothing wrapped or cut."""

from __future__ import annotations

import json

from click.testing import CliRunner
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from ledger_support import T0, intent
from toolbound._output import public_url
from toolbound.cli import _cli
from toolbound.config import load_config
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.ledger.store import LedgerKey
from toolbound.service.api import create_app
from toolbound.service.core import Service

LONG = "a note longer than any terminal, " * 5 + "the end"  # 172 characters, under 200


def _config(tmp_path, url="sqlite:///toolbound.db"):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text(url))
    return path


def _one_call(path) -> str:
    with TestClient(create_app(Service(load_config(path)))) as client:
        answer = client.post(
            "/v1/proposals",
            json={"tool": "notes.shout", "arguments": json.dumps({"text": LONG}), "call_id": "c"},
            headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": "k1"},
        ).json()
    return str(answer["invocation_id"])


def test_check_config_json_describes_a_valid_file(tmp_path, effects_path):
    """`check-config --json`: valid, the tools, principals, grants and where it listens."""
    path = _config(tmp_path)
    result = CliRunner().invoke(_cli, ["check-config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["valid"] is True
    assert document["file"] == str(path)
    assert "notes.add@v1" in document["tools"]
    assert document["principals"] == ["agent", "ana", "ops", "eve", "self"]
    assert document["grants"] == 6
    assert set(document["listen"]) == {"host", "port"}


def test_check_config_json_lists_every_problem_and_exits_1(tmp_path):
    """An invalid file: valid false and each problem as a key path and a message."""
    path = tmp_path / "bad.toml"
    path.write_text('[store]\nurl = "mysql://x"\n\n[service]\nport = "eighty"\n')
    result = CliRunner().invoke(_cli, ["check-config", str(path), "--json"])
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["valid"] is False
    paths = [p["path"] for p in document["problems"]]
    assert {"store.url", "service.port"} <= set(paths)
    assert all(p["message"] for p in document["problems"])


def test_a_store_password_is_never_printed(tmp_path, effects_path):
    """check-config shows the store URL with its password replaced by ***."""
    url = "postgresql://toolbound:s3cret-pw@db.internal:5432/toolbound"
    path = _config(tmp_path, url)
    runner = CliRunner()
    for args in (["check-config", str(path)], ["check-config", str(path), "--json"]):
        result = runner.invoke(_cli, args)
        assert result.exit_code == 0, result.output
        assert "s3cret-pw" not in result.output
        assert "postgresql://toolbound:***@db.internal:5432/toolbound" in result.output
    assert public_url("sqlite:///toolbound.db") == "sqlite:///toolbound.db"


def test_trace_json_is_the_call_and_every_event_whole(tmp_path, effects_path):
    """`trace --json`: the call's head and its events as stored, no detail shortened."""
    path = _config(tmp_path)
    invocation = _one_call(path)
    result = CliRunner().invoke(_cli, ["trace", invocation, "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["invocation"]["invocation_id"] == invocation
    assert document["invocation"]["tool"] == "notes.shout@v1"
    kinds = [e["kind"] for e in document["events"]]
    assert kinds[0] == "proposal"
    assert [e["seq"] for e in document["events"]] == sorted(e["seq"] for e in document["events"])
    assert LONG in result.stdout


def test_trace_piped_prints_every_detail_on_one_line(tmp_path, effects_path):
    """Not a terminal: no "…" and no wrapping, so a long argument and the digest stay whole."""
    path = _config(tmp_path)
    invocation = _one_call(path)
    result = CliRunner().invoke(_cli, ["trace", invocation, "--config", str(path)])
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    assert any(LONG in line for line in result.output.splitlines())
    digest = json.loads(
        CliRunner().invoke(_cli, ["trace", invocation, "--config", str(path), "--json"]).stdout
    )["invocation"]["digest"]
    assert f"digest {digest}" in result.output.splitlines()


def test_trace_json_of_a_missing_call_writes_nothing_on_stdout(tmp_path, effects_path):
    """No such invocation: exit 1, the reason on stderr, stdout left empty for the script."""
    path = _config(tmp_path)
    result = CliRunner().invoke(_cli, ["trace", "nope", "--config", str(path), "--json"])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "no invocation nope" in result.stderr


def test_unknown_lists_outcome_unknown_calls_and_exits_1_while_any_remain(tmp_path):
    """`unknown`: none → exit 0 and an empty list; one left unknown → it is listed, exit 1."""
    path = _config(tmp_path)
    runner = CliRunner()
    empty = runner.invoke(_cli, ["unknown", "--config", str(path), "--json"])
    assert empty.exit_code == 0, empty.output
    assert json.loads(empty.stdout) == {"unknown": []}

    key = LedgerKey(scope="acme", tool_version="orders.create@v1", key="k-unknown")
    ledger = SQLiteLedger(tmp_path / "toolbound.db")
    try:
        ledger.claim_executing(intent(key, "inv-9"), now=T0)
        ledger.advance(key, invocation_id="inv-9", phase="unknown", now=T0)
    finally:
        ledger.close()

    listed = runner.invoke(_cli, ["unknown", "--config", str(path), "--json"])
    assert listed.exit_code == 1, listed.output
    (row,) = json.loads(listed.stdout)["unknown"]
    assert (row["invocation_id"], row["tool"], row["key"]) == ("inv-9", "orders.create@v1", key.key)
    assert row["tenant"] == "acme"
    text = runner.invoke(_cli, ["unknown", "--config", str(path)])
    assert text.exit_code == 1
    assert "inv-9" in text.output
    assert "1 unknown outcome(s)" in text.output


def test_piped_tables_end_each_line_at_its_text(tmp_path, effects_path):
    """Not a terminal: no line ends in the spaces a table pads its last column with."""
    result = CliRunner().invoke(_cli, ["check-config", str(_config(tmp_path))])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any("notes.add@v1" in line for line in lines)
    assert lines == [line.rstrip() for line in lines]
