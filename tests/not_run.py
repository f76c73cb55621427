"""A pytest plugin: at the end of the run, each group of tests that could not run here, and why.

A green run must not be mistaken for a whole one. Two kinds of skip name a group that
this machine could not run — a binary, a package or the shared test data missing:

- a whole module skipped while it was collected (``pytest.importorskip`` or
  ``pytest.skip(..., allow_module_level=True)`` at its top);
- a test skipped with a reason that says ``did NOT run`` (the convention of the loud
  skips: "NO CHROMIUM FOUND on PATH: the console browser tests did NOT run ...").

Each reason is printed once, after pytest's own summary, with how many tests or
modules it held back and in which folders. Every other skip is a case that does not
apply by design (a surface that cannot express it, a platform feature); those are only
counted (``pytest -rs`` lists them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pytest

MARK = "did NOT run"
"""The words by which a test's skip reason says a group could not run here."""

TITLE = "could not run here"


class NotRun:
    """Collects the skips of one session; prints what could not run in the summary."""

    def __init__(self) -> None:
        self.groups: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.by_design = 0

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:
            self.groups[_reason(report)][_folder(report.nodeid)] += 1

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.skipped or hasattr(report, "wasxfail"):
            return
        reason = _reason(report)
        if MARK in reason:
            self.groups[reason][_folder(report.nodeid)] += 1
        else:
            self.by_design += 1

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        # After pytest's own summary and its count line, so it is the last thing read.
        terminalreporter = config.pluginmanager.get_plugin("terminalreporter")
        if not self.groups or terminalreporter is None:
            return
        terminalreporter.write_sep("=", TITLE, yellow=True, bold=True)
        for reason, folders in sorted(self.groups.items()):
            where = ", ".join(f"{folder} ({n})" for folder, n in sorted(folders.items()))
            terminalreporter.write_line(f"- {reason}\n    held back: {where}")
        if self.by_design:
            terminalreporter.write_line(
                f"({self.by_design} other skip(s) are cases that do not apply by design: -rs)"
            )


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    """The skip's reason, without pytest's ``Skipped:`` prefix."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ").strip()


def _folder(nodeid: str) -> str:
    """The folder of a test or module, ``tests/service`` for ``tests/service/test_x.py::t``."""
    path = nodeid.split("::", 1)[0]
    return path.rpartition("/")[0] or path


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(NotRun(), "toolbound-not-run")
