"""Fixtures of the MCP tests; the helpers they share are in mcp_support.py."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def state(tmp_path: Path) -> Path:
    """The fault server's steering folder."""
    folder = tmp_path / "fault"
    folder.mkdir()
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A throwaway git repository with one commit and one file ready to stage."""
    path = tmp_path / "repo"
    path.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)  # noqa: S603, S607 - git from PATH

    git("init", "-q", "-b", "main")
    git("config", "user.email", "mira@example.test")
    git("config", "user.name", "Mira")
    (path / "README.md").write_text("hello\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "initial")
    (path / "notes.txt").write_text("first note\n")
    return path
