"""docs/operations.md's SQLite backup, as written: the copies are a store that opens whole."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from click.testing import CliRunner
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.cli import _cli
from toolbound.config import load_config
from toolbound.service.api import create_app
from toolbound.service.core import Service

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def _backup_snippet() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    (snippet,) = [b for b in blocks if ".backup(" in b]
    return snippet


def test_the_sqlite_backup_copies_ledger_and_journal_while_the_service_runs(
    tmp_path, effects_path, monkeypatch
):
    """Run beside a live service, the page's snippet yields a store whose trace reads back."""
    (tmp_path / "var").mkdir()
    (tmp_path / "backup").mkdir()
    live = tmp_path / "var" / "toolbound.toml"
    live.write_text(config_text("sqlite:///toolbound.db"))
    monkeypatch.chdir(tmp_path)
    with TestClient(create_app(Service(load_config(live)))) as client:
        answer = client.post(
            "/v1/proposals",
            json={"tool": "notes.shout", "arguments": json.dumps({"text": "hi"}), "call_id": "c"},
            headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": "k"},
        ).json()
        exec(_backup_snippet(), {})  # noqa: S102 - the documentation's own snippet

    copy = tmp_path / "backup" / "toolbound.toml"
    copy.write_text(config_text("sqlite:///toolbound.db"))
    with sqlite3.connect(tmp_path / "backup" / "toolbound.db") as ledger:
        assert ledger.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    trace = CliRunner().invoke(_cli, ["trace", answer["invocation_id"], "--config", str(copy)])
    assert trace.exit_code == 0, trace.output
    assert "notes.shout@v1" in trace.output
