"""A server written with the Python SDK's high-level API (FastMCP, ``MCPServer`` in 2.x).

Run as ``python corpus_fastmcp.py`` (stdio), as its README says. Its tools take typed
arguments — a pydantic model among them, so its schema has ``$defs`` and ``$ref`` —
and return structured content; it offers one resource, one resource template and one
prompt. Part of the corpus the gateway is tested against (``test_mcp_corpus``).
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

app = MCPServer("corpus-fastmcp")


class Line(BaseModel):
    """One order line."""

    sku: str = Field(pattern=r"^[A-Z]{3}-\d{3}$")
    quantity: int = Field(ge=1, le=99)


class Total(BaseModel):
    """What an order comes to."""

    lines: int
    units: int


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def order_total(lines: list[Line], rush: bool = False) -> Total:  # noqa: FBT001, FBT002
    """Count the lines and units of an order."""
    del rush
    return Total(lines=len(lines), units=sum(line.quantity for line in lines))


@app.tool()
def greet(name: str, tone: Literal["plain", "warm"] = "plain") -> str:
    """Greet someone."""
    return f"Hello, {name}{'!' if tone == 'warm' else '.'}"


@app.resource("corpus://readme", mime_type="text/plain")
def readme() -> str:
    """What this server is."""
    return "A FastMCP server of the gateway's corpus."


@app.resource("corpus://orders/{order_id}", mime_type="application/json")
def order(order_id: str) -> str:
    """One order, by id."""
    return f'{{"id": "{order_id}", "lines": 2}}'


@app.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."


if __name__ == "__main__":
    app.run()
