"""Prometheus metrics for the surfaces that serve calls: the HTTP service and the MCP gateway.

:class:`CallMetrics` is a :class:`~toolbound.trace.TraceSink`: it watches each call's
trace and counts every answer the call gives — its ending, and before that a parking
for a person — by tool and by outcome, with the time from the proposal to that answer
(a confirmed call's second answer includes the person's wait). Gauges that only the
surface knows — calls waiting for a person, quarantined upstream tools, upstream
health — are read when Prometheus scrapes, from callables the surface registers with
:meth:`CallMetrics.gauge`. :meth:`CallMetrics.exposition` is the text a ``/metrics``
endpoint answers.

Metric names follow Prometheus' conventions; the duration histogram is the
``gen_ai.execute_tool.duration`` of the OpenTelemetry GenAI conventions under its
Prometheus name::

    toolbound_tool_calls_total{tool, outcome}          calls ended, by outcome kind
    toolbound_tool_call_duration_seconds{tool, outcome} proposal → ending
    toolbound_<gauge>{...}                             what the surface registered

A tool label is a tool the runtime looked up (``name@version``); a name the model made
up is counted as ``unknown``, so nobody can grow the label set by proposing calls.
Needs ``prometheus-client`` (the ``service`` and ``mcp`` extras).

Several processes counting into one exposition (``toolbound serve`` with ``[service]
workers``) use prometheus-client's multiprocess mode: with ``PROMETHEUS_MULTIPROC_DIR``
set when the process starts, the counts live in that folder's files and
:meth:`CallMetrics.exposition` sums every process's, with the gauges read here.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from toolbound._state import OUTCOME_KIND, State

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

    from prometheus_client.metrics_core import Metric

    from toolbound.pipeline.confirm import ConfirmationDesk
    from toolbound.trace import TraceEvent

__all__ = ["CONTENT_TYPE", "CallMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The media type of :meth:`CallMetrics.exposition`."""

_UNKNOWN = "unknown"
_OPEN_MAX = 10_000  # calls followed at once; the oldest are forgotten beyond it
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class CallMetrics:
    """Counts calls as their traces end; renders them, and the surface's gauges, for Prometheus."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._calls = Counter(
            "toolbound_tool_calls",
            "Tool calls that ended (or parked for a person), by outcome.",
            ("tool", "outcome"),
            registry=self.registry,
        )
        self._duration = Histogram(
            "toolbound_tool_call_duration_seconds",
            "Time from the proposal to the call's ending (gen_ai.execute_tool.duration).",
            ("tool", "outcome"),
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._open: OrderedDict[str, _Open] = OrderedDict()
        # The labelled series by (tool, outcome): as many as the metrics' own label
        # sets, which only tools the runtime looked up (or "unknown") can grow.
        self._by_labels: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        self._gauges = _Gauges()
        self.registry.register(self._gauges)
        self._exposed = self.registry
        """What a scrape reads: this registry, or every process's counts and these gauges."""
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if folder:
            self._exposed = CollectorRegistry(auto_describe=True)
            MultiProcessCollector(self._exposed, path=folder)  # type: ignore[no-untyped-call]
            self._exposed.register(self._gauges)

    # -- the trace sink --------------------------------------------------------------------

    def emit(self, invocation_id: str, event: TraceEvent) -> None:
        """Follow one call: its start, the tool it resolved to, each answer it gave."""
        kind = event.kind
        if kind == "transition":
            # A read of the dict needs no lock (one operation under the interpreter's
            # lock); only the compound changes below take it.
            call = self._open.get(invocation_id)
            if call is not None and event.state is not None:
                call.state = event.state
                spec = event.data.get("spec")  # set once the tool was looked up
                if isinstance(spec, str):
                    call.tool = spec
        elif kind == "proposal":
            with self._lock:
                self._open[invocation_id] = _Open(event.at)
                while len(self._open) > _OPEN_MAX:
                    self._open.popitem(last=False)
        elif kind == "tool_message" and "reason" not in event.data:
            # One message per answer (a later re-cut for a batch budget has a reason).
            call = self._open.get(invocation_id)
            if call is None:
                return
            outcome = OUTCOME_KIND.get(call.state, "cancelled")  # COMMITTED: cancelled after commit
            calls, duration = self._series(call.tool, outcome)
            calls.inc()
            duration.observe(max(0.0, event.at - call.at))
            if outcome != "awaiting_confirmation":
                with self._lock:
                    self._open.pop(invocation_id, None)

    def _series(self, tool: str, outcome: str) -> tuple[Counter, Histogram]:
        """The counter and histogram of one (tool, outcome), looked up once."""
        series = self._by_labels.get((tool, outcome))
        if series is None:
            series = (self._calls.labels(tool, outcome), self._duration.labels(tool, outcome))
            self._by_labels[tool, outcome] = series
        return series

    # -- what the surface adds ---------------------------------------------------------------

    def gauge(
        self,
        name: str,
        documentation: str,
        read: Callable[[], float | Mapping[tuple[str, ...], float]],
        labels: tuple[str, ...] = (),
    ) -> None:
        """Register ``toolbound_<name>``, read from ``read()`` at every scrape.

        ``read`` returns the value, or with ``labels`` a mapping of label values to
        values (an upstream's name to 1 when it answers, for one).
        """
        self._gauges.add(f"toolbound_{name}", documentation, read, labels)

    def count_pending(self, desk: ConfirmationDesk) -> None:
        """Register ``toolbound_pending_confirmations``: the desk's calls still open (R7)."""
        self.gauge(
            "pending_confirmations",
            "Calls waiting for a person, their window still open.",
            lambda: len(desk.pending()),
        )

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format (:data:`CONTENT_TYPE`)."""
        return generate_latest(self._exposed)


class _Open:
    """A call being followed: when it was proposed, its tool, its latest state."""

    __slots__ = ("at", "state", "tool")

    def __init__(self, at: float) -> None:
        self.at = at
        self.tool = _UNKNOWN
        self.state = State.PROPOSED


class _Gauges:
    """A collector that reads each registered gauge when scraped."""

    def __init__(self) -> None:
        self._gauges: list[
            tuple[str, str, Callable[[], float | Mapping[tuple[str, ...], float]], tuple[str, ...]]
        ] = []

    def add(
        self,
        name: str,
        documentation: str,
        read: Callable[[], float | Mapping[tuple[str, ...], float]],
        labels: tuple[str, ...],
    ) -> None:
        self._gauges.append((name, documentation, read, labels))

    def describe(self) -> Iterator[Metric]:
        # Nothing up front: the gauges are added after the collector is registered.
        return iter(())

    def collect(self) -> Iterator[Metric]:
        for name, documentation, read, labels in self._gauges:
            family = GaugeMetricFamily(name, documentation, labels=list(labels))
            value = read()
            if isinstance(value, int | float):
                family.add_metric([], float(value))
            else:
                for label_values, v in value.items():
                    family.add_metric(list(label_values), float(v))
            yield family
