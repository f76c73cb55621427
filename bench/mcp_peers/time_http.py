"""An MCP server over streamable HTTP with one read tool, the upstream of the HTTP rows.

``get_current_time`` answers as mcp-server-time's tool does (structured content: the
zone, the time and whether daylight saving is in effect), from the official SDK's
``MCPServer``. Run: ``python time_http.py PORT``.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from mcp.server.mcpserver import MCPServer

server = MCPServer("time-http")


@server.tool()
def get_current_time(timezone: str) -> dict[str, object]:
    """The current time in an IANA time zone."""
    now = datetime.now(UTC).astimezone(ZoneInfo(timezone))
    return {"timezone": timezone, "datetime": now.isoformat(), "is_dst": bool(now.dst())}


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
