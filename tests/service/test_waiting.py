"""Waiting without polling (R7, R18): a call read once it settles, and the tenant's events."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest
from servers import Server
from service_config import KEYS, config_text


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def park(client, text: str) -> dict[str, object]:
    body = {"tool": "notes.add", "arguments": json.dumps({"text": text}), "call_id": text}
    r = client.post("/v1/proposals", json=body, headers={**auth("agent"), "Idempotency-Key": text})
    assert r.status_code == 202, r.text
    return r.json()


def decide_later(client, parked: dict[str, object], delay: float) -> threading.Thread:
    def decide() -> None:
        time.sleep(delay)
        client.post(
            f"/v1/invocations/{parked['invocation_id']}/decision",
            json={"digest": parked["digest"], "decision": "approve"},
            headers=auth("ana"),
        )

    thread = threading.Thread(target=decide)
    thread.start()
    return thread


def test_a_waiting_read_answers_once_a_person_decided(client):
    """?wait: the answer comes when the call is settled, not when the wait runs out."""
    parked = park(client, "wait for me")
    deciding = decide_later(client, parked, 0.5)
    started = time.monotonic()
    r = client.get(f"/v1/invocations/{parked['invocation_id']}?wait=30", headers=auth("agent"))
    took = time.monotonic() - started
    deciding.join()
    assert r.status_code == 200
    assert (r.json()["status"], r.json()["decision"]) == ("observed", "approved")
    assert took < 15


def test_a_waiting_read_gives_the_call_as_it_stands_when_time_is_up(client):
    """Nobody decides: after ?wait seconds, the parked call as it is."""
    parked = park(client, "nobody decides")
    started = time.monotonic()
    r = client.get(f"/v1/invocations/{parked['invocation_id']}?wait=0.4", headers=auth("agent"))
    assert r.json()["status"] == "awaiting_confirmation"
    assert 0.35 <= time.monotonic() - started < 10


@pytest.mark.parametrize("wait", ["0", "-1", "61", "nan", "soon"])
def test_a_wait_out_of_bounds_is_a_bad_query(client, wait):
    """A wait is seconds above 0 and at most 60; anything else is 400 bad_query."""
    parked = park(client, f"bounds {wait}")
    r = client.get(f"/v1/invocations/{parked['invocation_id']}?wait={wait}", headers=auth("ana"))
    assert r.status_code == 400
    assert r.json()["code"] == "bad_query"


def events_of(text: str) -> list[dict[str, object]]:
    """The events of an SSE body: id, event and the data as JSON."""
    found = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if "event" in fields:
            found.append(
                {"id": fields["id"], "event": fields["event"], **json.loads(fields["data"])}
            )
    return found


def test_the_event_stream_tells_parked_decided_and_finished_in_order(client):
    """A call parked, decided and run: three events, in order, each with its cursor as id."""
    parked = park(client, "stream me")
    decide_later(client, parked, 0).join()
    r = client.get("/v1/events?timeout=0.3", headers=auth("agent"))
    assert r.headers["content-type"].startswith("text/event-stream")
    got = [(e["event"], e["invocation_id"]) for e in events_of(r.text)]
    assert got == [(kind, parked["invocation_id"]) for kind in ("parked", "decided", "finished")]


def test_the_event_stream_goes_on_after_the_last_event_id(client):
    """Reconnecting with Last-Event-ID sends only what came after it."""
    first = park(client, "one")
    seen = events_of(client.get("/v1/events?timeout=0.2", headers=auth("agent")).text)
    assert [e["invocation_id"] for e in seen] == [first["invocation_id"]]
    second = park(client, "two")
    headers = {**auth("agent"), "Last-Event-ID": str(seen[-1]["id"])}
    later = events_of(client.get("/v1/events?timeout=0.2", headers=headers).text)
    assert [e["invocation_id"] for e in later] == [second["invocation_id"]]


def test_a_tenant_sees_only_its_own_events(client):
    """Another tenant's stream (eve's) holds none of acme's calls."""
    park(client, "acme only")
    r = client.get("/v1/events?timeout=0.2", headers=auth("eve"))
    assert events_of(r.text) == []


def test_a_stream_from_a_real_server_delivers_a_decision_made_while_it_is_open(
    tmp_path, effects_path
):
    """A real `toolbound serve`: the event arrives on an open stream as the decision lands."""
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db"))
    server = Server(config, {"TOOLBOUND_TEST_EFFECTS": str(effects_path)}).start()
    try:
        body = {"tool": "notes.add", "arguments": '{"text": "live"}', "call_id": "live"}
        headers = {**auth("agent"), "Idempotency-Key": "live"}
        parked = httpx.post(f"{server.url}/v1/proposals", json=body, headers=headers).json()
        kinds: list[str] = []
        with httpx.stream(
            "GET", f"{server.url}/v1/events?timeout=20", headers=auth("agent"), timeout=30
        ) as stream:
            lines = stream.iter_lines()
            for line in lines:
                if line.startswith("event: "):
                    kinds.append(line.removeprefix("event: "))
                    if kinds == ["parked"]:
                        httpx.post(
                            f"{server.url}/v1/invocations/{parked['invocation_id']}/decision",
                            json={"digest": parked["digest"], "decision": "approve"},
                            headers=auth("ana"),
                        )
                    if "finished" in kinds:
                        break
        assert kinds == ["parked", "decided", "finished"]
    finally:
        server.stop()
