"""R18 item 8: two service processes share one PostgreSQL store and act as one.

The same idempotency key sent to both executes once; a confirmation given on one
resumes the call parked on the other; two people deciding at once on two processes
produce exactly one decision.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import httpx
import pytest
from servers import Server
from service_config import DATABASE, KEYS, config_text
from service_pack import EFFECTS_ENV, effects


@pytest.fixture
def pair(pg_cluster, pg_conninfo, tmp_path, effects_path):
    schema = pg_conninfo.split("search_path=")[1].rstrip("'")
    url = (
        f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{DATABASE}"
        f"?options={quote(f'-c search_path={schema}')}"
    )
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text(url, confirm_writes=False))
    env = {EFFECTS_ENV: str(effects_path)}
    a = Server(config, env).start()
    b = Server(config, env).start()
    yield a, b
    a.stop()
    b.stop()


def post(server: Server, body: dict, key: str, who: str = "agent") -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/proposals",
        json=body,
        headers={"Authorization": f"Bearer {KEYS[who]}", "Idempotency-Key": key},
        timeout=30,
    )


def test_the_same_key_sent_to_both_executes_once(pair):
    a, b = pair
    body = {"tool": "notes.add", "arguments": '{"text": "slow"}', "call_id": "c1"}
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda s: post(s, body, "same-key"), (a, b)))
    codes = sorted(r.status_code for r in answers)
    # One ran; the other either waited out the first (replay) or was told it is in progress.
    assert codes in ([200, 200], [200, 409])
    assert effects() == ["slow"]
    ok = [r for r in answers if r.status_code == 200]
    assert {r.json()["invocation_id"] for r in ok} == {ok[0].json()["invocation_id"]}
    # Afterwards either process replays the one answer.
    for server in (a, b):
        again = post(server, body, "same-key")
        assert again.headers["idempotent-replayed"] == "true"
        assert again.json()["invocation_id"] == ok[0].json()["invocation_id"]
    assert effects() == ["slow"]


def test_the_same_write_under_two_keys_runs_once_through_the_ledger(pair):
    """Two HTTP keys, same arguments: the ledger's digest key replays the first effect (R8)."""
    a, b = pair
    body = {"tool": "notes.add", "arguments": '{"text": "once"}', "call_id": "c1"}
    first = post(a, body, "key-1").json()
    second = post(b, body, "key-2").json()
    assert first["status"] == second["status"] == "observed"
    assert effects() == ["once"]


def test_a_confirmation_on_one_resumes_the_call_parked_on_the_other(pair):
    a, b = pair
    body = {"tool": "notes.send", "arguments": '{"text": "to bob"}', "call_id": "c1"}
    parked = post(a, body, "p1").json()
    assert parked["status"] == "awaiting_confirmation"
    listed = httpx.get(
        f"{b.url}/v1/confirmations", headers={"Authorization": f"Bearer {KEYS['ana']}"}
    ).json()["confirmations"]
    assert [c["invocation_id"] for c in listed] == [parked["invocation_id"]]

    def approve(server: Server) -> httpx.Response:
        return httpx.post(
            f"{server.url}/v1/invocations/{parked['invocation_id']}/decision",
            json={"digest": parked["digest"], "decision": "approve"},
            headers={"Authorization": f"Bearer {KEYS['ana']}"},
            timeout=30,
        )

    # Two approvals race on two processes: one decision is recorded, the call runs once.
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(approve, (b, a)))
    assert sorted(r.status_code for r in answers) == [200, 409]
    done = next(r for r in answers if r.status_code == 200).json()
    assert (done["status"], done["invocation_id"]) == ("observed", parked["invocation_id"])
    assert effects() == ["send:to bob"]
    seen_from_a = httpx.get(
        f"{a.url}/v1/invocations/{parked['invocation_id']}",
        headers={"Authorization": f"Bearer {KEYS['agent']}"},
    ).json()
    assert (seen_from_a["status"], seen_from_a["approver"]) == ("observed", "ana")
