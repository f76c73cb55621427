"""PostgreSQL stopped and started under a small load, against a real ``toolbound serve``.

During the outage every request is answered 503 with Retry-After within a second,
never 500 and never held; ``/healthz`` answers at once throughout; after the
restart the first requests succeed (the pools replace their dead connections); every
acknowledged call is in the journal as its client was told, and no write ran twice.
Loopback only, on a cluster of its own (the session's cluster is never stopped).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest
from servers import Server
from service_config import KEYS, config_text
from service_pack import effects

from pgcluster import find_bindir, throwaway_cluster


def _as_told(server: Server, load: _Load) -> list[tuple[str, dict[str, object]]]:
    """Every acknowledged call (answered 200, with an outcome), found as its client was told."""
    acknowledged = [(text, told) for _, s, _, text, told in load.writes if s == 200]
    with httpx.Client(timeout=15) as client:
        for text, told in acknowledged:
            r = client.get(
                f"{server.url}/v1/invocations/{told['invocation_id']}",
                headers={"Authorization": f"Bearer {KEYS['ops']}"},
            )
            assert r.status_code == 200, (text, r.text)
            assert r.json()["status"] == told["status"], text
    return acknowledged


@dataclass
class _Load:
    """Writers and a health probe, each recording what it was answered and how fast."""

    url: str
    stop: threading.Event = field(default_factory=threading.Event)
    writes: list[tuple[float, int, float, str, dict[str, object]]] = field(default_factory=list)
    health: list[tuple[float, int, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def writer(self, name: str) -> None:
        n = 0
        with httpx.Client(timeout=15) as client:
            while not self.stop.is_set():
                n += 1
                text = f"{name}-{n}"
                body = {"tool": "notes.add", "arguments": f'{{"text": "{text}"}}', "call_id": text}
                headers = {"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": text}
                start = time.monotonic()
                try:
                    r = client.post(f"{self.url}/v1/proposals", json=body, headers=headers)
                except httpx.HTTPError:
                    status, answer = -1, {}
                else:
                    status, answer = r.status_code, r.json()
                    if status == 503:
                        assert r.headers["retry-after"] == "1"
                with self.lock:
                    self.writes.append((start, status, time.monotonic() - start, text, answer))
                time.sleep(0.02)

    def prober(self) -> None:
        with httpx.Client(timeout=15) as client:
            while not self.stop.is_set():
                start = time.monotonic()
                r = client.get(f"{self.url}/healthz")
                self.health.append((start, r.status_code, time.monotonic() - start))
                time.sleep(0.05)


def test_a_postgres_outage_is_503s_and_loses_nothing(tmp_path, effects_path):
    """Stop PostgreSQL for 4 s under load: 503s, /healthz fast, 0 lost, 0 twice."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("NO POSTGRESQL BINARIES FOUND: the PostgreSQL outage test did NOT run")
    with throwaway_cluster(bindir, databases=("toolbound",)) as cluster:
        store = f"postgresql://postgres@127.0.0.1:{cluster.port}/toolbound"
        config = tmp_path / "toolbound.toml"
        config.write_text(config_text(store, confirm_writes=False))
        server = Server(config, env={}).start(timeout=30)
        load = _Load(server.url)
        threads = [threading.Thread(target=load.writer, args=(f"w{i}",)) for i in range(2)]
        threads.append(threading.Thread(target=load.prober))
        try:
            for t in threads:
                t.start()
            time.sleep(1.0)
            down = time.monotonic()
            cluster.stop()
            time.sleep(4.0)
            restarting = time.monotonic()
            cluster.start()
            up = time.monotonic()
            deadline = up + 20
            while time.monotonic() < deadline:
                if any(s == 200 and at > up for at, s, *_ in load.writes):
                    break
                time.sleep(0.1)
            time.sleep(0.5)
        finally:
            load.stop.set()
            for t in threads:
                t.join(30)
        try:
            statuses = Counter(s for _, s, *_ in load.writes)
            assert set(statuses) <= {200, 503}, statuses
            outage = [w for w in load.writes if down + 0.5 < w[0] < restarting - 1.0]
            assert outage, "no request was sent during the outage"
            assert {s for _, s, *_ in outage} == {503}
            # The bound: a store that cannot answer is a 503 within a second.
            assert max(e for _, s, e, *_ in load.writes if s == 503) < 1.0
            # The pools find the server back at once, not when a backoff next fires.
            back = min(at + e for at, s, e, *_ in load.writes if s == 200 and at > up)
            assert back - up < 3.0
            assert {s for _, s, _ in load.health} == {200}
            assert max(e for *_, e in load.health) < 0.5
            acknowledged = _as_told(server, load)
        finally:
            server.stop()
    ran = Counter(effects())
    assert all(ran[text] == 1 for text, told in acknowledged if told["status"] == "observed")
    assert max(ran.values()) == 1
