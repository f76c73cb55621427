"""Each extra works from the built wheel, installed alone into a fresh virtualenv.

The wheel is built once; for each extra the README names commands for (cli, service,
mcp, postgres) a new venv gets ``toolbound[EXTRA]`` from that wheel, its dependencies
from the package index — fetched once into a wheelhouse every venv installs from, so
the index is asked once, not once per extra (pip's cache keeps later runs short). Then
the commands the docs name for the extra run from that venv: their
``--help``, ``check-config`` on the example configuration, ``serve`` answering
``/healthz``, ``mcp-serve`` and ``mcp-gateway`` listing tools to the official MCP
client over stdio — and a command of an extra that is not installed names the extra
to install instead of failing with a traceback.

These tests need the network (or a warm pip cache) and take a minute or more, so they
carry the ``packaging`` marker: ``pytest -m packaging`` runs them, as ``.ci/run`` does;
the default run (``make test``) leaves them out.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

import pytest

pytestmark = pytest.mark.packaging

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "toolbound.toml"
EXTRAS = ("cli", "service", "mcp", "postgres")
INSTALL_TIMEOUT = 600


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("toolbound-*.whl")
    return built


@pytest.fixture(scope="module")
def wheelhouse(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every dependency of every extra, from the package index, resolved and fetched once."""
    house = tmp_path_factory.mktemp("wheelhouse")
    done = subprocess.run(  # noqa: S603 - this interpreter's pip, fixed arguments
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--dest",
            str(house),
            f"toolbound[{','.join(EXTRAS)}] @ {wheel.as_uri()}",
        ],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
        check=False,
        env=_clean_env(),
    )
    assert done.returncode == 0, f"pip download:\n{done.stderr}"
    return house


@pytest.fixture(scope="module")
def venvs(
    wheel: Path, wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """One fresh venv per extra, each with ``toolbound[EXTRA]`` from the wheel: its bin folder.

    Each install resolves ``toolbound[EXTRA]`` on its own, from the wheelhouse only:
    what the extra declares is all it gets.
    """
    root = tmp_path_factory.mktemp("venvs")

    def make(extra: str) -> Path:
        folder = root / extra
        subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
            [sys.executable, "-m", "venv", str(folder)], check=True, capture_output=True
        )
        done = subprocess.run(  # noqa: S603 - the venv's own pip
            [
                str(folder / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",  # bytecode is written on first import; this saves minutes
                "--no-index",
                "--find-links",
                str(wheelhouse),
                f"toolbound[{extra}] @ {wheel.as_uri()}",
            ],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
            env=_clean_env(),
        )
        assert done.returncode == 0, f"pip install toolbound[{extra}]:\n{done.stderr}"
        return folder / "bin"

    # Creating venvs waits on the disk more than on the processor: all at once.
    with ThreadPoolExecutor(len(EXTRAS)) as pool:
        return dict(zip(EXTRAS, pool.map(make, EXTRAS), strict=True))


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without this checkout's source on the path: the wheel only."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return {**env, **extra}


def toolbound(
    bin_dir: Path, *argv: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - the venv's own script
        [str(bin_dir / "toolbound"), *argv],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
        cwd=cwd,
        env=_clean_env(),
    )


def names_the_extra(done: subprocess.CompletedProcess[str], extra: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"pip install 'toolbound[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr


def example_copy(folder: Path, *, gateway: str = "") -> Path:
    """The example configuration with its store in ``folder``, plus ``gateway`` sections."""
    text = EXAMPLE.read_text().replace(
        'url = "sqlite:///../.toolbound/toolbound.db"', 'url = "sqlite:///toolbound.db"'
    )
    assert 'url = "sqlite:///toolbound.db"' in text
    path = folder / "toolbound.toml"
    path.write_text(text + gateway)
    return path


def test_the_cli_extra_runs_its_commands_and_names_the_others(venvs, tmp_path):
    """check-config, hash-key and each command's --help; serve and mcp-serve name their extra."""
    bin_dir = venvs["cli"]
    for command in ((), ("check-config",), ("trace",), ("reconcile",), ("demo",), ("hash-key",)):
        done = toolbound(bin_dir, *command, "--help")
        assert done.returncode == 0, (command, done.stderr)
        assert "Usage:" in done.stdout
    checked = toolbound(bin_dir, "check-config", str(EXAMPLE))
    assert checked.returncode == 0, checked.stderr
    assert "valid" in checked.stdout
    hashed = toolbound(bin_dir, "hash-key", stdin="demo-agent-key\n")
    assert hashed.returncode == 0, hashed.stderr
    assert hashed.stdout.strip() in EXAMPLE.read_text()
    config = str(example_copy(tmp_path))
    names_the_extra(toolbound(bin_dir, "serve", "--config", config), "service")
    names_the_extra(
        toolbound(bin_dir, "mcp-serve", "--config", config, "--tools", "pack:tools"), "mcp"
    )


def test_the_service_extra_serves_the_api_and_the_console(venvs, tmp_path):
    """Serve answers /healthz and shows the console's login page (templates are packaged)."""
    bin_dir = venvs["service"]
    assert toolbound(bin_dir, "serve", "--help").returncode == 0
    config = example_copy(tmp_path)
    port = _free_port()
    process = subprocess.Popen(  # noqa: S603 - the venv's own script
        [str(bin_dir / "toolbound"), "serve", "--config", str(config), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_clean_env(),
        cwd=tmp_path,
    )
    try:
        health = _wait_for(f"http://127.0.0.1:{port}/healthz", process)
        assert health == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/console/login", timeout=5) as page:
            assert page.status == 200
            assert b'name="csrf"' in page.read()
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr is not None:
            process.stderr.close()
    names_the_extra(toolbound(bin_dir, "mcp-gateway", "--config", str(config), "tools"), "mcp")


def test_the_mcp_extra_serves_and_guards_tools_over_stdio(venvs, tmp_path):
    """mcp-serve lists the example tools to the official client; mcp-gateway guards it."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    bin_dir = venvs["mcp"]
    for command in ("mcp-serve", "mcp-gateway"):
        done = toolbound(bin_dir, command, "--help")
        assert done.returncode == 0, done.stderr
        assert "Usage:" in done.stdout
    (tmp_path / "pack.py").write_text(
        "from toolbound import Registry\n"
        "from toolbound.packs.example import register\n\n\n"
        "def tools():\n    registry = Registry()\n    register(registry)\n    return registry\n"
    )
    config = example_copy(tmp_path, gateway='\n[gateway]\nstdio_principal = "agent"\n')
    serve = [str(bin_dir / "toolbound"), "mcp-serve", "--config", str(config),
             "--tools", "pack:tools"]  # fmt: skip
    env = _clean_env(PYTHONPATH=str(tmp_path))
    params = StdioServerParameters(command=serve[0], args=serve[1:], env=env, cwd=str(tmp_path))

    async def listing(quiet: TextIO) -> list[str]:
        async with Client(stdio_client(params, errlog=quiet)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    import anyio

    with Path(os.devnull).open("w") as quiet:  # a sink for the server's stderr
        served = anyio.run(listing, quiet)
    assert "weather.forecast" in served, served

    upstream = ", ".join(f'"{part}"' for part in serve)
    (tmp_path / "gw").mkdir()
    gateway = example_copy(
        tmp_path / "gw",
        gateway=(
            '\n[gateway]\nstdio_principal = "agent"\n\n[[upstream]]\nname = "example"\n'
            f'command = [{upstream}]\nenv = {{ PYTHONPATH = "{tmp_path}" }}\n'
        ),
    )
    listed = toolbound(bin_dir, "mcp-gateway", "--config", str(gateway), "tools")
    assert listed.returncode == 0, (listed.stdout, listed.stderr)
    assert "example.weather.forecast\tserved" in listed.stdout
    names_the_extra(toolbound(bin_dir, "serve", "--config", str(config)), "service")


def test_the_postgres_extra_brings_its_driver_and_the_cli_names_its_extra(venvs):
    """The PostgreSQL store imports; alone, without cli, the command line names that extra."""
    bin_dir = venvs["postgres"]
    done = subprocess.run(  # noqa: S603 - the venv's own interpreter
        [str(bin_dir / "python"), "-c", "import psycopg, psycopg_pool, toolbound.ledger.postgres"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_clean_env(),
    )
    assert done.returncode == 0, done.stderr
    names_the_extra(toolbound(bin_dir, "--help"), "cli")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            pytest.fail(f"toolbound serve exited with {process.returncode}: {err}")
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:  # noqa: S310 - loopback
                return int(answer.status)
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"{url} did not answer within {timeout} s")


def test_every_extra_the_readme_names_a_command_for_is_covered():
    """The README's extras table and this file's venvs name the same extras."""
    readme = (ROOT / "README.md").read_text()
    named = {e for e in EXTRAS if f"| `toolbound[{e}]` |" in readme}
    assert named == set(EXTRAS)
