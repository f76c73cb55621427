"""Running toolbound's MCP commands as child processes for the official Node.js tools.

The Node packages (the TypeScript SDK, zod, the conformance suite, and the reference
servers everything, filesystem, memory and sequential-thinking) are pinned in
``node/package.json`` and installed by ``npm ci`` in that folder (``make test`` does it,
through ``make node``). Without them a test is skipped with the command to run — except
under CI (``CI=true``), where a missing install is a failure, not a reason to skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

HERE = Path(__file__).parent
NODE_DIR = HERE / "node"
TOOLBOUND = str(Path(sys.executable).parent / "toolbound")
SERVER_LIFETIME = 300  # seconds: a server the tests start stops by itself after this


def require_node_modules() -> str:
    """The ``node`` executable once the pinned packages are installed; else skip (CI: fail)."""
    node = shutil.which("node")
    missing = node is None or not (NODE_DIR / "node_modules" / "@modelcontextprotocol").is_dir()
    if missing:
        why = (
            "the Node.js test packages are not installed: the MCP Node.js tests did NOT run"
            f" (`make node`, or `npm ci` in {NODE_DIR})"
        )
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(why)
        pytest.skip(why)
    assert node is not None
    return node


def free_port() -> int:
    """A port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], *, timeout: float = 30.0) -> None:
    """Until something accepts on ``port``; fails early if ``process`` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            pytest.fail(f"the server exited with {process.returncode}:\n{err}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    pytest.fail(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


@contextlib.contextmanager
def serving_command(
    args: Sequence[str], *, port: int, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``toolbound ARGS`` listening on ``port`` of 127.0.0.1, stopped afterwards.

    Wrapped in ``timeout`` so that it stops by itself even if the test run is killed.
    """
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        **(env or {}),
    }
    process = subprocess.Popen(  # noqa: S603 - our own command line
        ["timeout", str(SERVER_LIFETIME), TOOLBOUND, *args],  # noqa: S607 - coreutils' timeout
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)
        # Its access log goes on stderr: drained, or a long run fills the pipe and the
        # server stops at its next line.
        threading.Thread(target=_drain, args=(process,), daemon=True).start()
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def run_node(node: str, script: str, *args: str, timeout: float = 90.0) -> str:
    """Run ``node/SCRIPT ARGS`` in the node folder; its stdout (fails on a non-zero exit)."""
    done = subprocess.run(  # noqa: S603 - our own script
        [node, script, *args],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"node {script} exited with {done.returncode}:\n{done.stderr}\n{done.stdout}")
    return done.stdout


def _drain(process: subprocess.Popen[bytes]) -> None:
    """Read ``process``'s stderr until it closes, keeping nothing."""
    stream = process.stderr
    if stream is None:
        return
    with contextlib.suppress(OSError, ValueError):  # closed under us when the server stops
        while stream.read(65536):
            pass
