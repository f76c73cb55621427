"""One reconcile: the CLI, the API and the console settle the ledger and the journal together."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner
from service_config import KEYS, config_text
from starlette.testclient import TestClient

from toolbound.cli import _cli
from toolbound.config import parse_config
from toolbound.ledger.rules import owner_may_act_until
from toolbound.service.api import create_app
from toolbound.service.core import Service

PACKS = 'packs = ["service_pack:register", "reconcile_pack:register"]'


@pytest.fixture
def config(tmp_path, effects_path):
    path = tmp_path / "toolbound.toml"
    text = config_text("sqlite:///toolbound.db", confirm_writes=False)
    path.write_text(text.replace('packs = ["service_pack:register"]', PACKS))
    return path


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def _lose(client, text: str) -> str:
    body = {"tool": "notes.save", "arguments": f'{{"text": "{text}"}}', "call_id": text}
    r = client.post("/v1/proposals", json=body, headers={**auth("agent"), "Idempotency-Key": text})
    assert r.json()["status"] == "outcome_unknown", r.text
    return str(r.json()["invocation_id"])


def _statuses(config, *ids: str) -> list[str]:
    service = Service(parse_config(config.read_text(), source=config))
    try:
        return [service.journal.get_call(i).status for i in ids]  # type: ignore[union-attr]
    finally:
        service.close()


def test_the_cli_settles_the_journal_with_the_ledger(config):
    """`toolbound reconcile --config`: the calls it settles leave outcome_unknown in the journal."""
    service = Service(parse_config(config.read_text(), source=config))
    try:
        with TestClient(create_app(service)) as client:
            saved, never = _lose(client, "saved"), _lose(client, "never")
            record = service.ledger.find(never)
        assert record is not None
    finally:
        service.close()
    # "Not committed" is found only once the call's owner can no longer start it (R9).
    wait = (owner_may_act_until(record) - datetime.now(UTC)).total_seconds()
    time.sleep(max(0.0, wait) + 0.1)
    result = CliRunner().invoke(_cli, ["reconcile", "--config", str(config), "--grace", "0"])
    assert result.exit_code == 0, result.output
    assert _statuses(config, saved, never) == ["reconciled_committed", "reconciled_not_committed"]
    service = Service(parse_config(config.read_text(), source=config))
    try:
        with TestClient(create_app(service)) as client:
            # The API agrees: nothing is unknown, and the call is not refused 409 as before.
            assert client.get("/v1/unknown", headers=auth("ops")).json() == {"unknown": []}
            shown = client.get(f"/v1/invocations/{saved}", headers=auth("ops")).json()
    finally:
        service.close()
    assert shown["status"] == "reconciled_committed"


def test_the_api_settles_both_through_the_same_function(config):
    """POST /v1/unknown/{id}/reconcile asks the tool; the ledger and the journal agree."""
    service = Service(parse_config(config.read_text(), source=config))
    try:
        with TestClient(create_app(service)) as client:
            saved = _lose(client, "saved")
            r = client.post(f"/v1/unknown/{saved}/reconcile", headers=auth("ops"))
            assert r.json()["status"] == "committed", r.text
            assert service.ledger.find(saved).phase == "committed"  # type: ignore[union-attr]
    finally:
        service.close()
    assert _statuses(config, saved) == ["reconciled_committed"]
