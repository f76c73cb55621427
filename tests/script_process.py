"""Another Python process running a test's own script, for the tests of several processes."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import toolbound

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def script_process(script: str, *args: str, first: str) -> Iterator[subprocess.Popen[str]]:
    """``script`` run by this interpreter on this checkout, once it has printed ``first``.

    Its standard input and output are pipes, for the test to talk to it; it is killed
    when the block ends.
    """
    src = str(Path(toolbound.__file__).parent.parent)
    with subprocess.Popen(  # noqa: S603 - this interpreter, our own script
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
    ) as process:
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == first
            yield process
        finally:
            process.kill()
