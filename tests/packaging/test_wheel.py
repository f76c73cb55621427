"""The distribution: a wheel that carries the licence, the metadata and the package data."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("toolbound-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield {name: archive.read(name) for name in archive.namelist()}


def _metadata(wheel):
    (name,) = [n for n in wheel if n.endswith(".dist-info/METADATA")]
    return wheel[name].decode()


def test_the_wheel_carries_the_apache_licence(wheel):
    """The licence text the metadata declares is in the wheel."""
    metadata = _metadata(wheel)
    assert "License-Expression: Apache-2.0" in metadata
    (licence,) = [n for n in wheel if n.endswith("/LICENSE")]
    assert b"Apache License" in wheel[licence]
    assert b"Version 2.0, January 2004" in wheel[licence]


def test_the_metadata_has_urls_classifiers_and_extras(wheel):
    """Project URLs, classifiers and every extra are published; dev tools are not."""
    metadata = _metadata(wheel)
    assert "Project-URL: Documentation" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    for extra in ("cli", "service", "mcp", "postgres", "all"):
        assert f"Provides-Extra: {extra}" in metadata
    for tool in ("pytest", "playwright", "mypy", "ruff"):
        assert tool not in metadata


def test_the_wheel_carries_the_package_data(wheel):
    """Typing marker, console templates and static files are packaged."""
    names = set(wheel)
    assert "toolbound/py.typed" in names
    assert any(n.startswith("toolbound/service/templates/") for n in names)
    assert any(n.startswith("toolbound/service/static/") for n in names)
