"""Real service processes for the scale-out and crash tests: ``toolbound serve``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """One ``toolbound serve`` process on a loopback port."""

    config: Path
    env: dict[str, str]
    port: int = 0
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    """Where stderr goes (appended), for long runs; unset, a pipe read on a failed start."""
    log_level: str = "warning"
    """``--log-level``: above ``info``, no access line per request fills an unread pipe."""
    args: tuple[str, ...] = ()
    """More of ``toolbound serve``'s options (``--workers 2``)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> Server:
        self.port = self.port or free_port()
        env = {**os.environ, **self.env}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
        log = None if self.log is None else self.log.open("ab")
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            [
                sys.executable,
                "-c",
                "from toolbound.cli import main; main()",
                "serve",
                "--config",
                str(self.config),
                "--port",
                str(self.port),
                "--log-level",
                self.log_level,
                *self.args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE if log is None else log,
        )
        if log is not None:
            log.close()  # the child holds its own copy
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                err = err or (self.log.read_text(errors="replace")[-2000:] if self.log else "")
                msg = f"toolbound serve exited with {self.process.returncode}: {err}"
                raise RuntimeError(msg)
            try:
                if httpx.get(f"{self.url}/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.TransportError:
                time.sleep(0.05)
        self.stop()
        msg = "toolbound serve did not answer in time"
        raise RuntimeError(msg)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipe()
