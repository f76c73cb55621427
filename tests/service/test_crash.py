"""R18 item 9: SIGKILL the service under load, restart it, and lose nothing acknowledged.

Two client threads send writes and reads (each write unique, each request its own
Idempotency-Key) for a bounded time; the server is killed with SIGKILL in the middle
and started again on the same store. Every answer a client received is then present
with the state it was given; no write ran twice, including writes whose answer was
lost in the kill and that the clients send again.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter

import httpx
import pytest
from servers import Server
from service_config import KEYS, config_text
from service_pack import EFFECTS_ENV, effects

HEADERS = {"Authorization": f"Bearer {KEYS['agent']}"}


@pytest.fixture
def server(tmp_path, effects_path):
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db", confirm_writes=False))
    s = Server(config, {EFFECTS_ENV: str(effects_path)}).start()
    yield s
    s.stop()


class Load:
    """Client threads sending unique writes and reads until told to stop."""

    def __init__(self, url: str, threads: int = 2) -> None:
        self.url = url
        self.acknowledged: list[tuple[str, dict]] = []
        self.unanswered: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._counter = itertools.count()
        self._threads = [
            threading.Thread(target=self._client, args=(f"t{i}",)) for i in range(threads)
        ]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(10)

    def _client(self, name: str) -> None:
        with httpx.Client(base_url=self.url, headers=HEADERS, timeout=5) as http:
            while not self._stop.is_set():
                n = next(self._counter)
                write = n % 2 == 0
                text = f"{name}-{n}"
                body = {
                    "tool": "notes.add" if write else "notes.shout",
                    "arguments": f'{{"text": "{text}"}}',
                    "call_id": f"c{n}",
                }
                try:
                    r = http.post("/v1/proposals", json=body, headers={"Idempotency-Key": text})
                except httpx.TransportError:
                    if write:
                        with self._lock:
                            self.unanswered.append(text)
                    time.sleep(0.01)
                    continue
                assert r.status_code == 200, r.text
                with self._lock:
                    self.acknowledged.append((text, r.json()))


def test_a_killed_service_loses_no_acknowledged_call(server):
    load = Load(server.url)
    time.sleep(1.5)
    server.kill()
    time.sleep(0.3)
    load.stop()
    assert len(load.acknowledged) > 20, "the load should have produced answers before the kill"

    server.start()
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
        # Every acknowledged invocation is there, in the state its client was told.
        for text, answer in load.acknowledged:
            stored = http.get(f"/v1/invocations/{answer['invocation_id']}").json()
            assert stored["status"] == answer["status"] == "observed", text
            assert stored["state"] == answer["state"]
            # R14: its trace survived with it, from the proposal to the answer sent back.
            trace = http.get(f"/v1/invocations/{answer['invocation_id']}/trace").json()
            kinds = [e["kind"] for e in trace["events"]]
            assert (kinds[0], kinds[-1]) == ("proposal", "tool_message"), text
        # The writes whose answers were lost are sent again, under new keys.
        for text in load.unanswered:
            body = {"tool": "notes.add", "arguments": f'{{"text": "{text}"}}', "call_id": "r"}
            http.post("/v1/proposals", json=body, headers={"Idempotency-Key": f"retry-{text}"})
        # Calls cut off by the kill are recorded as interrupted, with what the ledger knows.
        listed = http.get("/v1/invocations?status=interrupted&limit=1000").json()
        interrupted = [
            http.get(f"/v1/invocations/{c['invocation_id']}").json() for c in listed["invocations"]
        ]
        # Each starts with its proposal, recorded as it opened, and ends with its recovery.
        for call in interrupted:
            trace = http.get(f"/v1/invocations/{call['invocation_id']}/trace").json()
            kinds = [e["kind"] for e in trace["events"]]
            assert (kinds[0], kinds[-1]) == ("proposal", "recovery"), call["invocation_id"]
    written = Counter(effects())
    assert max(written.values()) == 1, "a write ran twice"
    for text, answer in load.acknowledged:
        if answer["tool"].startswith("notes.add"):
            assert written[text] == 1
    for call in interrupted:
        assert call["tool"] == "notes.add"
        assert call["note"]["reason"].startswith("the service stopped")
