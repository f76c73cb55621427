"""Virtual environments of the MCP proxies the gateway is measured against.

FastMCP's proxy and ``mcp-proxy`` each pin their own MCP SDK (and httpx) apart from
toolbound's, so each lives in a venv of its own under ``bench/.peers/``, made on
first use from the package index with the versions below, and runs as a child
process. Nothing of theirs is imported here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent / ".peers"

PEERS = {
    "fastmcp": "fastmcp==4.2.3",
    "mcp-proxy": "mcp-proxy==0.13.0",
}
"""Each peer's venv name and the requirement installed into it."""


def bin_dir(peer: str) -> Path:
    """The ``bin`` folder of ``peer``'s venv, made and filled if it is not there yet."""
    venv = ROOT / peer
    stamp = venv / f".installed-{PEERS[peer]}"
    if not stamp.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)  # noqa: S603
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, PEERS[peer]], check=True)  # noqa: S603 - pinned peers
        stamp.touch()
    return venv / "bin"
