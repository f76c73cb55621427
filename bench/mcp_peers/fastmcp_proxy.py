"""FastMCP's proxy in front of one MCP server URL, served over stdio (a bench peer).

Run with the interpreter of the ``fastmcp`` peer environment (:mod:`peers`):
``python fastmcp_proxy.py URL``.
"""

from __future__ import annotations

import sys

from fastmcp.server import create_proxy

if __name__ == "__main__":
    create_proxy(sys.argv[1]).run()
