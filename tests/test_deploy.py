"""The deployment files: the compose file, the image and the systemd unit.

The compose file agrees with the configuration it mounts; the image and the unit run
unprivileged, with a health check and a graceful stop.

Where a container engine answers, the image is built and run: healthy on /healthz, then
stopped by SIGTERM with status 0. Where none does, that test says so and is skipped.
"""

from __future__ import annotations

import configparser
import json
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from click.testing import CliRunner

from service.servers import Server
from toolbound.cli import _cli
from toolbound.config import load_config
from toolbound.mcp.config import load_gateway_config

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict] = COMPOSE["services"]


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def _mounted(service: dict[str, object], inside: str) -> Path:
    """The file of this folder a service sees at ``inside`` (a bind mount)."""
    for volume in service.get("volumes", []):
        source, target = str(volume).split(":")[:2]
        if target == inside and source.startswith("."):
            return (DEPLOY / source).resolve()
    pytest.fail(f"nothing of deploy/ is mounted at {inside}")


def _volume_covers(service: dict[str, object], path: Path) -> bool:
    """Whether ``path`` lies in a writable volume of the service."""
    for volume in service.get("volumes", []):
        parts = str(volume).split(":")
        if parts[-1] != "ro" and path.is_relative_to(parts[1]):
            return True
    return False


def _ports(service: dict[str, object]) -> set[int]:
    return {int(str(p).rsplit(":", 1)[1]) for p in service.get("ports", [])}


def _serving(kind: str) -> list[tuple[str, list[str]]]:
    return [
        (name, [str(c) for c in svc["command"]])
        for name, svc in SERVICES.items()
        if svc.get("command") and svc["command"][0] == kind
    ]


def test_the_compose_file_runs_the_service_and_the_gateway_beside_postgresql():
    """Three services: PostgreSQL, `toolbound serve`, `toolbound mcp-gateway --http`."""
    assert "postgres" in SERVICES
    assert len(_serving("serve")) == 1
    assert len(_serving("mcp-gateway")) == 1


@pytest.mark.parametrize(("name", "command"), _serving("serve"))
def test_the_service_s_configuration_passes_check_config(name, command):
    """`toolbound check-config` accepts the file the service mounts, tools and all."""
    path = _mounted(SERVICES[name], _option(command, "--config"))
    result = CliRunner().invoke(_cli, ["check-config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True


@pytest.mark.parametrize(("name", "command"), _serving("serve") + _serving("mcp-gateway"))
def test_the_store_is_the_compose_file_s_postgresql_with_its_credentials(name, command):
    """The store URL names the postgres service, its user, password and database."""
    config = load_config(_mounted(SERVICES[name], _option(command, "--config")))
    url = urlsplit(config.store_url)
    env = SERVICES["postgres"]["environment"]
    assert url.scheme == "postgresql"
    assert (url.hostname, url.port) == ("postgres", 5432)
    assert (url.username, url.password) == (env["POSTGRES_USER"], env["POSTGRES_PASSWORD"])
    assert url.path.lstrip("/") == env["POSTGRES_DB"]


def test_the_service_starts_once_postgresql_is_healthy():
    """The service waits for PostgreSQL's health check; the gateway for the service's."""
    ((service, _),) = _serving("serve")
    ((gateway, _),) = _serving("mcp-gateway")
    needs = SERVICES[service]["depends_on"]
    assert needs["postgres"]["condition"] == "service_healthy"
    assert SERVICES[gateway]["depends_on"][service]["condition"] == "service_healthy"


@pytest.mark.parametrize(("name", "command"), _serving("serve") + _serving("mcp-gateway"))
def test_each_listens_on_all_interfaces_at_the_port_it_publishes(name, command):
    """In a container the server binds 0.0.0.0, on the port the compose file publishes."""
    assert _option(command, "--host") == "0.0.0.0"  # noqa: S104 - inside the container
    assert int(_option(command, "--port")) in _ports(SERVICES[name])


def test_the_console_secret_the_file_names_is_set_for_the_service():
    """[service] console_secret_env names a variable the service's environment sets."""
    ((name, command),) = _serving("serve")
    config = load_config(_mounted(SERVICES[name], _option(command, "--config")))
    environment = SERVICES[name]["environment"]
    assert config.console_secret_env in environment


def test_the_gateway_s_configuration_loads_and_keeps_its_approvals_in_a_volume():
    """The gateway reads the same file; its approvals file lies in a writable volume."""
    ((name, command),) = _serving("mcp-gateway")
    assert "--http" in command
    config = load_gateway_config(_mounted(SERVICES[name], _option(command, "--config")))
    assert config.upstreams
    assert _volume_covers(SERVICES[name], config.approvals_path)
    ((service, _),) = _serving("serve")
    assert _volume_covers(SERVICES[service], config.approvals_path)  # the console reviews it


def _instructions() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.setdefault(word.upper(), []).append(rest.strip())
    return found


def test_the_image_runs_unprivileged_with_a_health_check_and_a_graceful_stop():
    """Non-root USER, HEALTHCHECK on /healthz at the served port, SIGTERM to toolbound as PID 1."""
    found = _instructions()
    assert found["USER"][-1] not in {"root", "0"}
    assert "/healthz" in found["HEALTHCHECK"][-1]
    cmd = json.loads(found["CMD"][-1])
    assert f":{_option(cmd, '--port')}/healthz" in found["HEALTHCHECK"][-1]
    assert found["STOPSIGNAL"] == ["SIGTERM"]
    assert json.loads(found["ENTRYPOINT"][-1]) == ["toolbound"]  # exec form: no shell between


def test_the_systemd_unit_checks_the_file_then_serves_it_unprivileged():
    """ExecStartPre runs check-config on the file ExecStart serves; SIGTERM; a system user."""
    unit = configparser.ConfigParser(interpolation=None)
    unit.read(DEPLOY / "toolbound.service")
    service = unit["Service"]
    check = shlex.split(service["ExecStartPre"])
    serve = shlex.split(service["ExecStart"])
    assert check[1:3] == ["check-config", _option(serve, "--config")]
    assert serve[1] == "serve"
    assert service["User"] not in {"root", "0"}
    assert service["KillSignal"] == "SIGTERM"
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_serve_shuts_down_cleanly_on_sigterm(tmp_path):
    """What the image's STOPSIGNAL and the unit's KillSignal rely on: SIGTERM runs the shutdown.

    The server stops, the application's shutdown (which closes the store) completes, and
    the process ends by the signal it was sent, as uvicorn reports it (-15; 143 in a
    container), not by a kill after a timeout.
    """
    config = (ROOT / "examples" / "toolbound.toml").read_text(encoding="utf-8")
    (tmp_path / "toolbound.toml").write_text(config.replace("../.toolbound/", ""))
    log = tmp_path / "serve.log"
    server = Server(tmp_path / "toolbound.toml", env={}, log=log, log_level="info").start()
    assert server.process is not None
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
    server.process.send_signal(signal.SIGTERM)
    code = server.process.wait(30)
    server.stop()
    assert code == -signal.SIGTERM
    text = log.read_text()
    assert "Application shutdown complete" in text
    assert "Traceback" not in text


def _engine() -> str:
    """A container engine that answers here, else the reason none does."""
    docker = shutil.which("docker") or shutil.which("podman")
    if docker is None:
        return "no docker or podman command"
    answer = subprocess.run(  # noqa: S603 - the engine's own client
        [docker, "info", "--format", "{{.ServerVersion}}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if answer.returncode != 0:
        return f"{Path(docker).name} info failed: {answer.stderr.strip().splitlines()[-1]}"
    return ""


def _engine_or_skip() -> str:
    why = _engine()
    if why:
        pytest.skip(f"no container engine answers here ({why}): the container test did NOT run")
    return str(shutil.which("docker") or shutil.which("podman"))


def test_the_image_builds_turns_healthy_and_stops_on_sigterm(tmp_path):
    """Built and run on a SQLite store: /healthz answers, then SIGTERM ends it with status 0."""
    engine = _engine_or_skip()
    tag = f"toolbound-test:{uuid.uuid4().hex[:8]}"
    subprocess.run([engine, "build", "-t", tag, str(ROOT)], check=True, timeout=1800)  # noqa: S603
    config = (ROOT / "examples" / "toolbound.toml").read_text(encoding="utf-8")
    config = config.replace("sqlite:///../.toolbound/toolbound.db", "sqlite:////tmp/tb.db")
    (tmp_path / "toolbound.toml").write_text(config)
    name = f"toolbound-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(  # noqa: S603
        [engine, "run", "-d", "--name", name, "-v", f"{tmp_path}:/etc/toolbound:ro", tag],
        check=True,
        timeout=60,
    )
    try:
        deadline = time.monotonic() + 120
        health = ""
        while time.monotonic() < deadline and health != "healthy":
            time.sleep(2)
            health = subprocess.run(  # noqa: S603
                [engine, "inspect", "--format", "{{.State.Health.Status}}", name],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        assert health == "healthy"
        subprocess.run([engine, "stop", "--time", "30", name], check=True, timeout=60)  # noqa: S603
        code = subprocess.run(  # noqa: S603
            [engine, "inspect", "--format", "{{.State.ExitCode}}", name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert code == str(128 + signal.SIGTERM)  # ended by the SIGTERM, not a SIGKILL
    finally:
        subprocess.run([engine, "rm", "-f", name], check=False, timeout=60)  # noqa: S603
        subprocess.run([engine, "rmi", "-f", tag], check=False, timeout=60)  # noqa: S603
