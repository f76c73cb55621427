"""``toolbound serve`` in several processes on one address: ``[service] workers``.

One process runs Python on one core at a time: past one core's worth of requests, a
replica's latency grows with its queue. ``workers = N`` runs N processes on the same
address (uvicorn's supervisor: it spawns them, replaces one that dies, and stops them
all on SIGINT or SIGTERM). Each worker is a replica of the others, exactly as replicas
on several machines are: it loads the same configuration file, builds its own
:class:`~toolbound.service.core.Service` and shares only the store, where every call,
parked call, lease and Idempotency-Key already lives. What else a person sees must
not depend on which worker took the request, so the supervisor hands each worker two
things of its own making (:class:`WorkerSpec`, in the environment):

* **the console's secret**: a session signed in on one worker is good on every
  other (unless ``[service] console_secret_env`` or ``console_secret_file`` names
  one, which is used as it is);
* **one folder for the metrics** (prometheus-client's multiprocess mode,
  ``PROMETHEUS_MULTIPROC_DIR``, unless the environment names one): ``/metrics``
  counts every worker's calls, whichever worker answers the scrape.

A ``memory`` store is refused with more than one worker: nothing would be shared.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Receive, Scope, Send

    from toolbound.config import ServiceConfig
    from toolbound.logs import Level
    from toolbound.service.core import Service

__all__ = ["ENV", "WorkerSpec", "app", "build_service", "serve_workers"]

ENV = "TOOLBOUND_SERVE_WORKER"
"""The environment variable carrying a worker's :class:`WorkerSpec` (JSON)."""

METRICS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's folder of the values every process counts."""

_log = logging.getLogger("toolbound.service")


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker is started with, beyond the configuration file itself."""

    config: str
    """The configuration file's absolute path."""
    log_level: str
    cookie_secure: bool
    console_secret: str | None
    """The secret every worker signs console sessions with (None: the file names one)."""

    def text(self) -> str:
        """The spec as the JSON text of :data:`ENV`."""
        return json.dumps(asdict(self))

    @classmethod
    def from_environment(cls) -> WorkerSpec:
        """The spec the supervisor set; a clear error when the process was not started so."""
        raw = os.environ.get(ENV)
        if raw is None:
            msg = f"{ENV} is unset: this factory is for the workers of `toolbound serve`"
            raise RuntimeError(msg)
        return cls(**json.loads(raw))


def build_service(config: ServiceConfig) -> Service:
    """The service of ``config``: its tools, its telemetry, its stores opened."""
    from toolbound.service.core import Service  # noqa: PLC0415
    from toolbound.wiring import telemetry_sinks  # noqa: PLC0415

    registry = config.build_registry()
    return Service(config, registry=registry, sinks=telemetry_sinks(config, registry))


def app() -> ASGIApp:
    """The factory uvicorn calls in each worker: the service of the file :data:`ENV` names.

    uvicorn calls it on the worker's running loop, so it only reads the spec: the
    service, whose stores open with blocking I/O, is built on a thread when the
    lifespan starts (:class:`_BuiltOffLoop`).
    """
    spec = WorkerSpec.from_environment()
    # Read once: the console's secret is no business of what this process starts.
    del os.environ[ENV]
    return _BuiltOffLoop(spec)


class _BuiltOffLoop:
    """An ASGI app that builds the worker's application off the loop, then is it."""

    def __init__(self, spec: WorkerSpec) -> None:
        self._spec = spec
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:  # the lifespan's startup, the first call uvicorn makes
            self._app = await asyncio.to_thread(_worker_app, self._spec)
        await self._app(scope, receive, send)


def _worker_app(spec: WorkerSpec) -> Starlette:
    """The application of ``spec``'s configuration, its service built and stores open."""
    from toolbound.config import load_config  # noqa: PLC0415
    from toolbound.logs import configure  # noqa: PLC0415
    from toolbound.service.api import create_app  # noqa: PLC0415
    from toolbound.service.http_protocol import HeadTimeout  # noqa: PLC0415

    config = load_config(spec.config)
    configure(cast("Level", spec.log_level), config.logging.format)
    config = replace(config, cookie_secure=config.cookie_secure or spec.cookie_secure)
    if spec.console_secret is not None:
        config = replace(config, console_secret_value=spec.console_secret)
    HeadTimeout.seconds = config.header_timeout
    service = build_service(config)
    if service.recovered:
        _log.warning("%d call(s) interrupted by the last stop, recorded", service.recovered)
    return create_app(service)


def serve_workers(
    config_path: str,
    config: ServiceConfig,
    *,
    host: str,
    port: int,
    log_level: str,
    workers: int,
) -> None:
    """Run ``workers`` processes serving ``config_path`` on ``host:port`` until interrupted."""
    import uvicorn  # noqa: PLC0415 - the service extra

    from toolbound.service.server import uvicorn_options  # noqa: PLC0415

    if config.store_url == "memory":
        msg = "[service] workers > 1 needs a shared store: `memory` is each process's own"
        raise ValueError(msg)
    shared = config.console_secret_value is None and config.console_secret_env is None
    spec = WorkerSpec(
        config=str(Path(config_path).resolve()),
        log_level=log_level,
        cookie_secure=config.cookie_secure,
        console_secret=secrets.token_hex(32) if shared else None,
    )
    metrics = None if METRICS_ENV in os.environ else tempfile.mkdtemp(prefix="toolbound-metrics-")
    os.environ[ENV] = spec.text()
    if metrics is not None:
        os.environ[METRICS_ENV] = metrics
    try:
        uvicorn.run(
            f"{__name__}:app",
            factory=True,
            workers=workers,
            http="toolbound.service.http_protocol:HeadTimeout",
            **uvicorn_options(config, host=host, port=port, log_level=log_level),
        )
    finally:
        os.environ.pop(ENV, None)
        if metrics is not None:
            os.environ.pop(METRICS_ENV, None)
            shutil.rmtree(metrics, ignore_errors=True)
