"""The public surface: __all__ is curated and the README example runs."""

from __future__ import annotations

import re
from pathlib import Path

import toolbound

ROOT = Path(__file__).resolve().parents[1]


def test_all_matches_exports():
    """Every name in __all__ exists, and every public import is listed."""
    public = {n for n in vars(toolbound) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(toolbound, n)).__name__ == "module"}
    assert set(toolbound.__all__) == public - modules
    assert sorted(toolbound.__all__) == sorted(set(toolbound.__all__))


def test_readme_example_runs(capsys):
    """The README's example runs and prints what its comments say."""
    text = (ROOT / "README.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("observed ['PROPOSED', 'PARSED'")
    assert out[0].endswith("'OBSERVED']")
    assert '"trust":"untrusted_tool_data"' in out[1]
    assert out[2] == "rejected duplicate_key"
    namespace["runtime"].close()  # type: ignore[attr-defined]
