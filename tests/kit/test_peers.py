"""The peer adapters run the cases through each framework as its docs show it.

These pin what each row is seen to do on a few telling cases, so a change in a
framework (or in an adapter) that moves a verdict is noticed here first.
"""

from __future__ import annotations

import pytest
from tool_runtime_conformance import bundled_cases, run_case

pytest.importorskip("pydantic_ai")

from tool_runtime_conformance.adapters.pydantic_ai_agent import (
    PydanticAIDefaults,
    PydanticAIGuarded,
)


def verdict(factory, case_id):
    case = next(c for c in bundled_cases() if c.id == case_id)
    return run_case(factory, case).verdict


@pytest.mark.parametrize(
    "case_id",
    ["r7-asks-before-running", "r7-approved-runs-once", "r7-denied-never-runs", "r4-extra-field"],
)
def test_pydantic_ai_guarded_asks_and_validates_where_defaults_do_not(case_id):
    """With approval and a schema check on, Pydantic AI asks and refuses; by default it runs."""
    assert verdict(PydanticAIGuarded, case_id) == "pass"
    assert verdict(PydanticAIDefaults, case_id) == "fail"


@pytest.mark.parametrize(
    "case_id",
    [
        "r7-arguments-replaced-after-approval",
        "r8-same-key-different-arguments",
        "r9-write-timeout",
        "r11-injected-instruction",
    ],
)
def test_pydantic_ai_guarded_still_fails_what_it_has_no_concept_for(case_id):
    """An approval names a call id, no key exists, a timeout is a retry, a result is plain text."""
    assert verdict(PydanticAIGuarded, case_id) == "fail"
