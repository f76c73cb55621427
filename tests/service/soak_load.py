"""The soak's moving parts: client threads with their log, chaos, and a sampler.

Every request a client sends has an Idempotency-Key (decisions are keyed by the
call they decide); the log keeps every answer a client was given (an *acknowledged*
call) and every request that got no answer or a 5xx, to be sent again afterwards.
"""

from __future__ import annotations

import itertools
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import httpx
from replicas import body, headers

if TYPE_CHECKING:
    from replicas import Replicas

REQUEST_TIMEOUT = 60.0


@dataclass(frozen=True)
class Sent:
    """One request as a client sent it: enough to send it again."""

    kind: str  # "write", "read", "park" or "decision"
    key: str
    text: str
    replica: int
    invocation_id: str | None = None  # decisions: the call decided
    digest: str | None = None
    decision: str | None = None


@dataclass
class Log:
    """What the clients were told, and what they were not."""

    acknowledged: list[tuple[Sent, int, dict]] = field(default_factory=list)
    unanswered: list[Sent] = field(default_factory=list)
    refused: list[tuple[Sent, int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, sent: Sent, response: httpx.Response | None) -> dict | None:
        with self.lock:
            if response is None or response.status_code >= 500:
                self.unanswered.append(sent)
                return None
            if response.status_code >= 400:
                self.refused.append((sent, response.status_code, response.text))
                return None
            answer = response.json()
            self.acknowledged.append((sent, response.status_code, answer))
            return answer


def send(url: str, sent: Sent) -> httpx.Response | None:
    """Send ``sent`` to the replica at ``url``; ``None`` when no answer came back."""
    try:
        if sent.kind == "decision":
            return httpx.post(
                f"{url}/v1/invocations/{sent.invocation_id}/decision",
                json={"digest": sent.digest, "decision": sent.decision},
                headers=headers("ana"),
                timeout=REQUEST_TIMEOUT,
            )
        tool = {"write": "notes.add", "read": "notes.shout", "park": "notes.send"}[sent.kind]
        return httpx.post(
            f"{url}/v1/proposals",
            json=body(tool, sent.text),
            headers=headers("agent", sent.key),
            timeout=REQUEST_TIMEOUT,
        )
    except httpx.TransportError:
        return None


class Load:
    """Client threads sending writes, reads and parked calls; a decider on other replicas."""

    def __init__(self, replicas: Replicas, rng: random.Random, *, clients: int = 3) -> None:
        self.replicas = replicas
        self.log = Log()
        self._stop = threading.Event()
        self._numbers = itertools.count()
        self._parked: queue.Queue[tuple[int, dict]] = queue.Queue()
        self._rngs = [random.Random(rng.random()) for _ in range(clients + 1)]  # noqa: S311
        self._threads = [
            threading.Thread(target=self._client, args=(self._rngs[i],), daemon=True)
            for i in range(clients)
        ]
        self._threads.append(
            threading.Thread(target=self._decider, args=(self._rngs[-1],), daemon=True)
        )
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(REQUEST_TIMEOUT + 10)

    def _pick(self, rng: random.Random, avoid: int | None = None) -> int | None:
        alive = self.replicas.alive()
        others = [i for i in alive if i != avoid] or alive
        return rng.choice(others) if others else None

    def _client(self, rng: random.Random) -> None:
        while not self._stop.is_set():
            replica = self._pick(rng)
            if replica is None:
                time.sleep(0.05)
                continue
            n = next(self._numbers)
            roll = rng.random()
            if roll < 0.6:
                # Slow enough to be caught mid-flight, before or after the effect.
                text = f"w-{n}-{rng.randint(50, 400)}-{rng.randint(0, 150)}"
                sent = Sent("write", f"k-{text}", text, replica)
            elif roll < 0.85:
                sent = Sent("read", f"k-r-{n}", f"r-{n}", replica)
            else:
                sent = Sent("park", f"k-p-{n}", f"p-{n}", replica)
            answer = self.log.answer(sent, send(self.replicas.url_of(replica), sent))
            if sent.kind == "park" and answer is not None:
                self._parked.put((replica, answer))

    def _decider(self, rng: random.Random) -> None:
        while not self._stop.is_set():
            try:
                parked_on, call = self._parked.get(timeout=0.2)
            except queue.Empty:
                continue
            replica = self._pick(rng, avoid=parked_on)
            if replica is None:
                continue
            sent = Sent(
                "decision",
                f"d-{call['invocation_id']}",
                call["invocation_id"],
                replica,
                invocation_id=call["invocation_id"],
                digest=call["digest"],
                decision="approve" if rng.random() < 0.7 else "deny",
            )
            self.log.answer(sent, send(self.replicas.url_of(replica), sent))


@dataclass(frozen=True)
class Event:
    """One thing the chaos did to a replica."""

    at: float
    action: str
    replica: int


class Chaos:
    """SIGKILL, SIGTERM and restart replicas at random, always leaving one alive."""

    def __init__(self, replicas: Replicas, rng: random.Random, *, pause: tuple[float, float]):
        self.replicas = replicas
        self.rng = rng
        self.pause = pause
        self.events: list[Event] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(*self.pause)):
                self._step()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)

    def _step(self) -> None:
        alive = self.replicas.alive()
        dead = [i for i in range(self.replicas.count) if i not in alive]
        if dead and (len(alive) == 1 or self.rng.random() < 0.5):
            i = self.rng.choice(dead)
            self.replicas.start(i)
            self.events.append(Event(time.time(), "start", i))
            return
        i = self.rng.choice(alive)
        kill = self.rng.random() < 0.7
        self.replicas.stop(i, kill=kill)
        self.events.append(Event(time.time(), "SIGKILL" if kill else "SIGTERM", i))


class Sampler:
    """Lists the calls taken over while the run goes on, with when they were seen."""

    def __init__(self, replicas: Replicas, *, every: float = 0.5) -> None:
        self.replicas = replicas
        self.every = every
        self.seen: dict[str, float] = {}  # invocation id → first seen ended by a takeover
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            alive = self.replicas.alive()
            if not alive:
                continue
            url = self.replicas.url_of(alive[0])
            for status in ("interrupted", "outcome_unknown"):
                try:
                    r = httpx.get(
                        f"{url}/v1/invocations?status={status}&limit=1000",
                        headers=headers("agent"),
                        timeout=10,
                    )
                except httpx.TransportError:
                    continue
                if r.status_code != 200:
                    continue
                now = time.time()
                for call in r.json()["invocations"]:
                    self.seen.setdefault(call["invocation_id"], now)


def takeover_of(events: list[dict]) -> tuple[str, float] | None:
    """Whose call a takeover ended, and when: the trace's ``recovery`` event."""
    for event in events:
        if event["kind"] == "recovery":
            at = datetime.fromisoformat(str(event["at"])).timestamp()
            return str(event["data"]["taken_over_from"]), at
    return None
