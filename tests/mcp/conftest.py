"""Fixtures of the MCP tests; the helpers they share are in mcp_support.py."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from toolbound._loopguard import ENV as LOOP_GUARD_ENV
from toolbound._loopguard import set_loop_guard

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture(autouse=True)
def no_blocking_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every MCP test fails if a store or identity call blocks an event loop's thread.

    Servers and gateways the tests start as subprocesses inherit the switch from the
    environment.
    """
    monkeypatch.setenv(LOOP_GUARD_ENV, "1")
    set_loop_guard(True)
    yield
    set_loop_guard(False)


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
