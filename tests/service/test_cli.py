"""The CLI's service commands: check-config explains problems; trace shows a timeline."""

from __future__ import annotations

import sqlite3

from click.testing import CliRunner
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.cli import _cli
from toolbound.config import load_config
from toolbound.service.api import create_app
from toolbound.service.core import Service


def test_check_config_accepts_the_example(tmp_path):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    result = CliRunner().invoke(_cli, ["check-config", str(path)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output
    assert "notes.add@v1" in result.output


def test_check_config_explains_every_problem_and_fails(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[store]\nurl = "mysql://x"\n\n[service]\nport = "eighty"\n')
    result = CliRunner().invoke(_cli, ["check-config", str(path)])
    assert result.exit_code == 1
    for words in ("store.url", "service.port", "principal", "3 problem(s)"):
        assert words in result.output


def test_check_config_on_a_missing_file_fails(tmp_path):
    result = CliRunner().invoke(_cli, ["check-config", str(tmp_path / "none.toml")])
    assert result.exit_code == 1
    assert "cannot read the file" in result.output


def test_trace_prints_the_timeline_from_the_store(tmp_path, effects_path):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    with TestClient(create_app(Service(load_config(path)))) as client:
        answer = client.post(
            "/v1/proposals",
            json={"tool": "notes.shout", "arguments": '{"text": "[red]hi[/]"}', "call_id": "c1"},
            headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": "k1"},
        ).json()
    runner = CliRunner()
    result = runner.invoke(
        _cli, ["trace", answer["invocation_id"], "--config", str(path)], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "notes.shout@v1" in result.output
    for kind in ("proposal", "transition", "attempt"):
        assert kind in result.output
    assert "[red]hi[/]" in result.output  # model text is shown as text, never as markup
    missing = runner.invoke(_cli, ["trace", "nope", "--config", str(path)])
    assert missing.exit_code == 1
    assert "no invocation nope" in missing.output


def test_a_store_a_newer_release_wrote_ends_the_command_with_its_reason(tmp_path):
    """No traceback: the store's message and code, and exit status 1."""
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    Service(load_config(path)).close()
    with sqlite3.connect(tmp_path / "toolbound.service.db") as db:
        db.execute("INSERT INTO toolbound_journal_migrations (name) VALUES ('format-99')")

    result = CliRunner().invoke(_cli, ["trace", "inv-1", "--config", str(path)])

    assert result.exit_code == 1
    assert "format 99" in result.output
    assert "[unsupported_schema]" in result.output
    assert "Traceback" not in result.output
