"""Several ``toolbound serve`` replicas on one PostgreSQL, for the soak and boundary tests.

Each replica is a real process over the soak pack (:mod:`soak_pack`); the set keeps
every instance each replica has been (``/healthz`` names it: the owner its calls
carry in the journal) with when it started answering and when it was stopped, so a
test can tell whether a call's owner was alive at a given moment.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
from servers import Server
from service_config import DATABASE, KEYS, config_text
from soak_pack import EFFECTS_ENV, GATES_ENV

if TYPE_CHECKING:
    from pathlib import Path

    from pgcluster import PgCluster


def store_url(cluster: PgCluster, conninfo: str) -> str:
    """The service's store URL for the test's own schema in the shared cluster."""
    schema = conninfo.split("search_path=")[1].rstrip("'")
    return (
        f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/{DATABASE}"
        f"?options={quote(f'-c search_path={schema}')}"
    )


@dataclass
class Life:
    """One instance of a replica: its owner id, and when it was up (``time.time()``)."""

    replica: int
    instance: str
    started: float
    ended: float | None = None


@dataclass
class Replicas:
    """``count`` replicas sharing one store, each startable, stoppable and killable."""

    root: Path
    url: str
    count: int = 3
    lease: float = 2.0
    servers: list[Server] = field(default_factory=list)
    lives: list[Life] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.effects = self.root / "effects"
        self.gates = self.root / "gates"
        for d in (self.effects, self.gates):
            d.mkdir(exist_ok=True)
        config = self.root / "toolbound.toml"
        text = config_text(self.url, confirm_writes=False, extra=f"lease = {self.lease}\n")
        config.write_text(text.replace("service_pack:register", "soak_pack:register"))
        env = {EFFECTS_ENV: str(self.effects), GATES_ENV: str(self.gates)}
        self.servers = [
            Server(config, env, log=self.root / f"replica-{i}.log") for i in range(self.count)
        ]

    def start(self, i: int) -> None:
        server = self.servers[i].start(timeout=60)
        instance = httpx.get(f"{server.url}/healthz", timeout=10).json()["instance"]
        with self._lock:
            self.lives.append(Life(i, instance, time.time()))

    def stop(self, i: int, *, kill: bool) -> None:
        """SIGKILL (``kill``) or SIGTERM replica ``i`` and wait until it has exited."""
        if kill:
            self.servers[i].kill()
        else:
            self.servers[i].stop()
        with self._lock:
            life = self._current(i)
            if life is not None:
                # Dead only once it has exited: a SIGTERMed replica drains its requests
                # and renews its leases meanwhile, and nothing of it may be taken before.
                life.ended = time.time()

    def alive(self) -> list[int]:
        return [i for i, s in enumerate(self.servers) if s.process and s.process.poll() is None]

    def url_of(self, i: int) -> str:
        return self.servers[i].url

    def life_of(self, instance: str) -> Life | None:
        with self._lock:
            return next((life for life in self.lives if life.instance == instance), None)

    def _current(self, i: int) -> Life | None:
        return next((x for x in reversed(self.lives) if x.replica == i and x.ended is None), None)

    def close(self) -> None:
        for i in self.alive():
            self.stop(i, kill=False)


def headers(who: str, key: str | None = None) -> dict[str, str]:
    h = {"Authorization": f"Bearer {KEYS[who]}"}
    if key is not None:
        h["Idempotency-Key"] = key
    return h


def body(tool: str, text: str, call_id: str = "c") -> dict[str, str]:
    return {"tool": tool, "arguments": f'{{"text": "{text}"}}', "call_id": call_id}
