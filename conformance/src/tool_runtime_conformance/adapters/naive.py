"""An example adapter: a naive runtime that parses with ``json.loads`` and calls the tool.

Copy this file to drive your own runtime. It shows the whole protocol in a few lines,
and it fails many cases on purpose: it has no schema validation, no authorization, no
approval, no idempotency and no commit boundary, so the kit can show what is missing.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING

from tool_runtime_conformance.adapter import LoopObservation, Observation

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from tool_runtime_conformance.adapter import Setup
    from tool_runtime_conformance.cases import Propose
    from tool_runtime_conformance.world import KitTool


_NEVER = threading.Event()


class NaiveRuntime:
    """Look the tool up by name, ``json.loads`` the arguments, call it, dump the result."""

    name = "naive (json.loads and call)"
    versions: Mapping[str, str] = {}

    def __init__(self) -> None:
        self.tools: dict[str, KitTool] = {}

    def start(self, setup: Setup) -> None:
        """Register each tool under its name (subject and grants are ignored)."""
        self.tools = {spec.name: tool for spec, tool in setup.tools}

    def propose(self, proposal: Propose, cancel: threading.Event) -> Observation:  # noqa: ARG002
        """Run the call at once; any exception becomes an error message for the model."""
        tool = self.tools.get(proposal.tool)
        if tool is None:
            return Observation(kind="refused", text=f"unknown tool {proposal.tool}")
        try:
            arguments = json.loads(proposal.arguments)
        except ValueError as exc:
            return Observation(kind="refused", text=f"invalid arguments: {exc}")
        try:
            value = tool(arguments)
        except Exception as exc:  # noqa: BLE001 - the naive runtime reports every error alike
            return Observation(kind="failed", text=f"error: {exc}")
        return Observation(kind="ran", text=json.dumps(value))

    def propose_turn(
        self, calls: Sequence[Propose], cancel: threading.Event, *, interleaved: bool
    ) -> Mapping[str, Observation]:
        """Optional (R16): several calls in one turn, run one after the other."""
        del interleaved  # the naive runtime only sees the joined arguments
        return {call.call_id: self.propose(call, cancel) for call in calls}

    def run_loop(
        self, turns: Sequence[Sequence[Propose]], budgets: Mapping[str, int]
    ) -> LoopObservation:
        """Optional (R13): a loop with no limits of its own, over until the model is done."""
        del budgets  # nothing here counts calls
        calls = [call for turn in turns for call in turn]
        return LoopObservation(
            end="finished", calls=self.propose_turn(calls, _NEVER, interleaved=False)
        )

    def approve(self, call_id: str, shown: str) -> Observation:  # noqa: ARG002
        """Nothing ever waits for a person here."""
        return Observation(kind="failed", text=f"nothing is waiting for approval: {call_id}")

    def deny(self, call_id: str) -> Observation:
        """Nothing ever waits for a person here."""
        return Observation(kind="failed", text=f"nothing is waiting for approval: {call_id}")

    def close(self) -> None:
        """Nothing to release."""
