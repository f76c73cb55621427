"""``read_file`` confined to one directory (R6 path scope).

The policy's :class:`~toolbound.gates.authorize.PathScope` admits a path only if
its real path (symlinks and ``..`` resolved) lies inside the root; the tool
resolves it again when it opens the file, so a link swapped in between cannot
lead it outside.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from toolbound._model import Resource, ToolSpec
from toolbound.execution.tool import NotCommitted

if TYPE_CHECKING:
    from toolbound._model import JSONObject, JSONValue
    from toolbound.execution.tool import ToolContext
    from toolbound.registry import RegisteredTool, Registry

__all__ = ["register", "spec"]

_MAX_READ = 1 << 20


def spec(root: str | os.PathLike[str], *, result_budget: int = 4096) -> ToolSpec:
    """``read_file@v1`` under ``root``."""
    base = Path(root)

    def resources(arguments: JSONObject) -> list[Resource]:
        # Relative paths are taken from the root, never from the process's cwd.
        return [Resource(kind="file", id=str(base / str(arguments["path"])), action="read")]

    return ToolSpec(
        name="read_file",
        version="v1",
        description="Read a UTF-8 text file from the user's workspace.",
        input_schema={
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1, "maxLength": 1024}},
            "required": ["path"],
            "additionalProperties": False,
        },
        output_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "size": {"type": "integer"},
                "content": {"type": "string"},
            },
            "required": ["path", "size", "content"],
            "additionalProperties": False,
        },
        effect="read",
        capabilities=("files:read",),
        resources=resources,
        result_budget=result_budget,
        empty_result="the file is empty",
        timeout=2.0,
        reads_untrusted=True,  # files arrive from anywhere: downloads, shares, mail
        reads_private=True,
    )


def register(
    registry: Registry, root: str | os.PathLike[str], *, result_budget: int = 4096
) -> RegisteredTool:
    """Register ``read_file@v1`` confined to ``root``."""
    real_root = Path(os.path.realpath(root))

    def read_file(arguments: JSONObject, _ctx: ToolContext) -> JSONValue:
        target = Path(os.path.realpath(real_root / str(arguments["path"])))
        if target != real_root and real_root not in target.parents:
            msg = "the path leads outside the workspace"
            raise NotCommitted(msg, code="outside_workspace", recoverable=False)
        try:
            data = target.read_bytes()[:_MAX_READ]
        except FileNotFoundError:
            msg = "no such file"
            raise NotCommitted(msg, code="not_found", recoverable=True) from None
        except IsADirectoryError:
            msg = "that is a directory"
            raise NotCommitted(msg, code="not_a_file", recoverable=True) from None
        text = data.decode("utf-8", errors="replace")
        return {"path": str(arguments["path"]), "size": len(data), "content": text}

    return registry.register(spec(root, result_budget=result_budget), read_file)
