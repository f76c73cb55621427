"""Reports of a run: a JSON document per runtime, and a Markdown table across runtimes."""

from __future__ import annotations

import platform
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from tool_runtime_conformance.adapter import Adapter
    from tool_runtime_conformance.runner import CaseResult

__all__ = ["END", "MARK", "START", "as_json", "markdown", "replace_table", "summary"]

START = "<!-- conformance-results:start -->"
END = "<!-- conformance-results:end -->"

MARK = {"pass": "pass", "fail": "**FAIL**", "not_applicable": "n.a."}


def summary(results: Sequence[CaseResult]) -> dict[str, int]:
    """How many cases passed, failed and were not applicable."""
    counts = {"pass": 0, "fail": 0, "not_applicable": 0}
    for result in results:
        counts[result.verdict] += 1
    return counts


def as_json(adapter: Adapter, results: Sequence[CaseResult]) -> dict[str, object]:
    """One runtime's run as a JSON-ready document (versions, date, every verdict)."""
    return {
        "runtime": adapter.name,
        "versions": dict(adapter.versions),
        "python": platform.python_version(),
        "date": datetime.now(UTC).date().isoformat(),
        "summary": summary(results),
        "cases": [
            {
                "id": r.case.id,
                "requirements": list(r.case.requirements),
                "r17_row": r.case.r17_row,
                "verdict": r.verdict,
                "reasons": list(r.reasons),
                "observed": {
                    c: {"kind": o.kind, "text": o.text} for c, o in r.observations.items()
                },
                **(
                    {} if r.loop is None else {"loop": {"end": r.loop.end, "detail": r.loop.detail}}
                ),
            }
            for r in results
        ],
    }


def _cell(result: Mapping[str, object]) -> str:
    return MARK[str(result["verdict"])]


def markdown(runs: Sequence[Mapping[str, object]]) -> str:
    """A table: one row per case, one column per runtime; versions and date below."""
    head = "| case | R | " + " | ".join(str(r["runtime"]) for r in runs) + " |"
    rule = "|---|---|" + "---|" * len(runs)
    by_run = [{c["id"]: c for c in r["cases"]} for r in runs]  # type: ignore[attr-defined]
    lines = [head, rule]
    for case in runs[0]["cases"]:  # type: ignore[attr-defined]
        cells = [
            _cell(verdicts[case["id"]]) if case["id"] in verdicts else "" for verdicts in by_run
        ]
        reqs = ", ".join(case["requirements"])
        lines.append(f"| `{case['id']}` | {reqs} | " + " | ".join(cells) + " |")
    totals = [r["summary"] for r in runs]
    lines.append(
        "| **passed / failed / n.a.** | | "
        + " | ".join(f"{t['pass']} / {t['fail']} / {t['not_applicable']}" for t in totals)  # type: ignore[index]
        + " |"
    )
    lines.append("")
    for run in runs:
        versions = "".join(f"{k} {v}; " for k, v in run["versions"].items())  # type: ignore[attr-defined]
        python, date = run["python"], run["date"]
        lines.append(f"- {run['runtime']}: {versions}Python {python}; run on {date}")
    return "\n".join(lines) + "\n"


def replace_table(document: str, table: str) -> str:
    """``document`` with the text between its :data:`START` and :data:`END` lines replaced."""
    head, start, rest = document.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        msg = f"the document has no {START} ... {END} section to replace"
        raise ValueError(msg)
    return f"{head}{START}\n{table}{END}{tail}"
