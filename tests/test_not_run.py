"""The run's summary names each group of tests that could not run here, and why, once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent

SUITE = {
    "needs_a_package/test_module.py": (
        "import pytest\n"
        "pytest.importorskip('no_such_package_here', reason='the frob SDK: pip install frob')\n"
        "def test_one(): pass\n"
    ),
    "browser/test_pages.py": (
        "import pytest\n"
        "pytestmark = pytest.mark.skipif(True, reason='NO FROBNITZ FOUND: the page tests did "
        "NOT run (install frobnitz)')\n"
        "def test_a(): pass\n"
        "def test_b(): pass\n"
    ),
    "core/test_core.py": (
        "import pytest\n"
        "def test_runs(): pass\n"
        "def test_by_design(): pytest.skip('this surface cannot express the case')\n"
        "@pytest.mark.xfail(reason='a known bug', strict=True)\n"
        "def test_known_bug(): assert False\n"
    ),
}


def _run(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        # Only the plugins asked for: the installed ones take seconds to load.
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    pytest = [sys.executable, "-m", "pytest", "-p", "not_run", "-p", "no:cacheprovider"]
    return subprocess.run(  # noqa: S603 - pytest itself, on a suite written here
        [*pytest, *options, str(folder)],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "options", [(), ("-p", "xdist.plugin", "-n", "2")], ids=["one process", "xdist"]
)
def test_each_group_that_could_not_run_is_named_once_with_its_reason(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """A skipped module and loud "did NOT run" skips are listed; by-design skips only counted.

    The same under pytest-xdist, whose workers' reports reach the controlling process.
    """
    for name, text in SUITE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    result = _run(tmp_path, *options)

    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout.split("could not run here", 1)[1]
    assert summary.count("NO FROBNITZ FOUND") == 1
    assert "held back: browser (2)" in summary
    assert "the frob SDK: pip install frob" in summary
    assert "held back: needs_a_package (1)" in summary
    assert "cannot express" not in summary
    assert "(1 other skip(s) are cases that do not apply by design" in summary


def test_a_run_where_everything_ran_prints_no_such_section(tmp_path: Path) -> None:
    """Nothing held back: no section at all, so its presence always means something."""
    (tmp_path / "test_fine.py").write_text("def test_fine(): pass\n")
    result = _run(tmp_path)
    assert result.returncode == 0, result.stdout
    assert "could not run here" not in result.stdout
