"""The failure table of a tool runtime as a kit any runtime can run.

Cases are data (:mod:`tool_runtime_conformance.cases`); an adapter drives one runtime
(:mod:`tool_runtime_conformance.adapter`); the kit's own tools record every effect
(:mod:`tool_runtime_conformance.world`); the runner judges what it saw
(:mod:`tool_runtime_conformance.runner`); ``python -m tool_runtime_conformance`` prints
the verdicts (:mod:`tool_runtime_conformance.report`).
"""

from __future__ import annotations

from tool_runtime_conformance.adapter import (
    Adapter,
    LoopAdapter,
    LoopObservation,
    NotApplicable,
    Observation,
    Setup,
    TracingAdapter,
    TurnAdapter,
)
from tool_runtime_conformance.cases import Case, CaseFormatError, bundled_cases, load_path
from tool_runtime_conformance.runner import CaseResult, marked_untrusted, run_case, run_cases
from tool_runtime_conformance.world import KitTool, Refusal, ResponseLost

__all__ = [
    "Adapter",
    "Case",
    "CaseFormatError",
    "CaseResult",
    "KitTool",
    "LoopAdapter",
    "LoopObservation",
    "NotApplicable",
    "Observation",
    "Refusal",
    "ResponseLost",
    "Setup",
    "TracingAdapter",
    "TurnAdapter",
    "bundled_cases",
    "load_path",
    "marked_untrusted",
    "run_case",
    "run_cases",
]
