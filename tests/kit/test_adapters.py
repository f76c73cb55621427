"""The shipped adapters against the bundled cases: toolbound passes, the naive runtime fails."""

from __future__ import annotations

import pytest
from tool_runtime_conformance import bundled_cases, run_case, run_cases
from tool_runtime_conformance.adapters.naive import NaiveRuntime
from tool_runtime_conformance.adapters.toolbound_library import ToolboundRuntime
from tool_runtime_conformance.runner import MISSING

# Cases toolbound fails today, each with what it does instead (reported, never dropped).
TOOLBOUND_FAILS: dict[str, str] = {}

# The only cases a runtime that json.loads and calls can pass: the ones where
# json.loads itself refuses (a stream cut inside a number included), the tool is
# missing by name, a control that must run, or a failure the tool reports before
# any effect.
NAIVE_PASSES = {
    "r3-empty-arguments",
    "r3-truncated",
    "r3-trailing-data",
    "r3-invalid-utf8",
    "r4-valid-call-runs",
    "r6-amount-within-limit",
    "r17-unknown-tool-near-name",
    "r17-unknown-tool-case",
    "r17-unknown-tool-trailing-space",
    "r8-different-keys-run-twice",
    "r9-refused-before-effect",
    "r10-retry-after-refusal",
    "r15-stream-cut-inside-a-number",
    "r15-deltas-reassembled",
    "r6-path-inside-scope",
    "r13-finishes-within-budget",
    "r15-interleaved-deltas-kept-apart",
    "r15-interleaved-same-tool",
    "r15-escape-split-across-deltas",
    "r16-results-pair-by-id",
    "r16-writes-in-model-order",
    "r16-writes-one-at-a-time",
}


def _param(case):
    reason = TOOLBOUND_FAILS.get(case.id)
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in bundled_cases()])
def test_toolbound_passes_the_case(case):
    """Toolbound's library runtime shows the result each case requires."""
    result = run_case(ToolboundRuntime, case)
    assert result.verdict == "pass", result.reasons


def test_the_naive_runtime_fails_every_case_that_needs_a_gate():
    """json.loads-and-call passes only where json.loads or the lookup refuses by itself."""
    results = run_cases(NaiveRuntime, bundled_cases())
    passed = {r.case.id for r in results if r.verdict == "pass"}
    assert passed == NAIVE_PASSES
    # It keeps no trace, and says so: every trace case is n.a. with that reason.
    not_applicable = {r.case.id: r.reasons for r in results if r.verdict == "not_applicable"}
    assert set(not_applicable) == {c.id for c in bundled_cases() if c.expect_trace}
    assert all(reasons == (MISSING["trace"],) for reasons in not_applicable.values())
    assert all(r.reasons for r in results if r.verdict == "fail")
