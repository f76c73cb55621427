"""``python -m tool_runtime_conformance --adapter module:factory [...]``.

Runs the cases (the bundled ones, or ``--cases PATH``) against each adapter and prints
one line per case and a summary; ``--json FILE`` writes every run's verdicts,
``--markdown`` prints the table across runtimes, ``--update DOC`` writes it into a
Markdown document between its ``conformance-results`` markers. Exit code: 0 when every applicable
case passed for every adapter, 1 when any failed, 2 when the command line, an
adapter or a case file is unusable.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tool_runtime_conformance.cases import CaseFormatError, bundled_cases, load_path
from tool_runtime_conformance.report import as_json, markdown, replace_table, summary
from tool_runtime_conformance.runner import run_cases

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tool_runtime_conformance.adapter import AdapterFactory
    from tool_runtime_conformance.cases import Case
    from tool_runtime_conformance.runner import CaseResult

OK, FAILED, UNUSABLE = 0, 1, 2


def _factory(spec: str) -> AdapterFactory:
    module, _, name = spec.partition(":")
    if not module or not name:
        msg = f"--adapter wants module:factory, got {spec!r}"
        raise ValueError(msg)
    factory: AdapterFactory = getattr(importlib.import_module(module), name)
    return factory


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tool_runtime_conformance", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--adapter", action="append", required=True, metavar="MODULE:FACTORY")
    parser.add_argument(
        "--cases", type=Path, help="a case file or folder (default: the bundled cases)"
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PREFIX",
        help="run the cases whose id starts so",
    )
    parser.add_argument(
        "--json", type=Path, metavar="FILE", help="write the verdicts of every run as JSON"
    )
    parser.add_argument("--markdown", action="store_true", help="print the table across runtimes")
    parser.add_argument("--update", type=Path, metavar="DOC", help="write the table into DOC")
    parser.add_argument("--quiet", action="store_true", help="no line per case")
    return parser


def _err(text: str) -> None:
    sys.stderr.write(text + "\n")


def _line(result: CaseResult) -> str:
    why = f"  ({'; '.join(result.reasons)})" if result.reasons else ""
    return f"{result.verdict.upper():>14}  {result.case.id}{why}"


def _select(args: argparse.Namespace) -> tuple[Case, ...]:
    cases = load_path(args.cases) if args.cases else bundled_cases()
    return tuple(c for c in cases if not args.only or c.id.startswith(tuple(args.only)))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the kit; the exit code is documented in the module docstring."""
    args = _parser().parse_args(argv)
    try:
        cases = _select(args)
        factories = [(spec, _factory(spec)) for spec in args.adapter]
        if args.update:
            replace_table(args.update.read_text("utf-8"), "")  # refuse a document early
    except (CaseFormatError, ValueError, ImportError, AttributeError, OSError) as exc:
        _err(f"error: {exc}")
        return UNUSABLE
    runs, failed = [], False
    for spec, factory in factories:
        _err(f"# {spec}")
        echo = None if args.quiet else (lambda r: _err(_line(r)))
        results = run_cases(factory, cases, on_result=echo)
        counts = summary(results)
        failed = failed or counts["fail"] > 0
        _err(f"{counts['pass']} passed, {counts['fail']} failed, {counts['not_applicable']} n.a.")
        runs.append(as_json(factory(), results))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2, ensure_ascii=False) + "\n", "utf-8")
    if args.markdown:
        sys.stdout.write(markdown(runs))
    if args.update:
        doc = args.update.read_text("utf-8")
        args.update.write_text(replace_table(doc, markdown(runs)), "utf-8")
    return FAILED if failed else OK


if __name__ == "__main__":
    sys.exit(main())
