"""Provenance: untrusted tool data cannot steer a write (R6, R11).

Marking tool output as untrusted keeps it out of the instruction channel, but a
model that obeys injected text still emits a well-formed call; the harm is in where
its argument values came from. This package tracks that at the tool boundary,
for any agent design:

* :class:`Label` — where a value came from: the user, the runtime, or one tool
  result (tool, version, invocation id; whether the tool reads untrusted content
  — :attr:`~toolbound.ToolSpec.reads_untrusted` — or private data).
* :class:`Provenance` — a session's index of labelled values. The
  :class:`~toolbound.Loop` keeps one per run by default; callers of
  :meth:`~toolbound.Runtime.run` pass one on :class:`~toolbound.CallContext`.
  Each call's normalized arguments are examined against it (whole values and
  tokens, after :func:`fold`), and the :class:`FlowReport` goes into the trace
  (event ``provenance``) and to the policy.
* :class:`FlowPolicy` with :class:`TrustedSource` and :class:`NoPrivateData` —
  declarative rules per tool parameter, deciding allow / confirm / deny with the
  matched :class:`Finding` objects as evidence.
* :mod:`~toolbound.provenance.classes` — kinds of private data (identity
  documents, payment cards, credentials, health) that leave only when the user's
  own words ask for them.
* :func:`guard_writes` — the preset: rules for every write tool derived from its
  parameters' roles (:mod:`~toolbound.provenance.roles`: ``destination``,
  ``target``, ``secret``, ``content``, ``quantity``), declared on
  :attr:`~toolbound.ToolSpec.roles` or inferred from the schema.
"""

from toolbound.provenance.classes import (
    DATA_CLASSES,
    DataClassName,
    asked_classes,
    field_class,
    luhn,
    text_classes,
)
from toolbound.provenance.index import DEFAULT_MIN_LENGTH, Provenance
from toolbound.provenance.labels import (
    Concern,
    Finding,
    FlowReport,
    Label,
    Match,
    Origin,
    Source,
    Trail,
)
from toolbound.provenance.normalize import (
    canonical,
    destinations,
    fold,
    keys,
    number,
    short_terms,
    short_words,
    tokens,
    variants,
)
from toolbound.provenance.policy import (
    FlowPolicy,
    FlowRule,
    NoPrivateData,
    Otherwise,
    RuleSource,
    TrustedSource,
)
from toolbound.provenance.preset import MIN_LENGTH, WriteGuard, guard_writes
from toolbound.provenance.roles import ROLES, Role, RoleName, RolePlan, plan

__all__ = [
    "DATA_CLASSES",
    "DEFAULT_MIN_LENGTH",
    "MIN_LENGTH",
    "ROLES",
    "Concern",
    "DataClassName",
    "Finding",
    "FlowPolicy",
    "FlowReport",
    "FlowRule",
    "Label",
    "Match",
    "NoPrivateData",
    "Origin",
    "Otherwise",
    "Provenance",
    "Role",
    "RoleName",
    "RolePlan",
    "RuleSource",
    "Source",
    "Trail",
    "TrustedSource",
    "WriteGuard",
    "asked_classes",
    "canonical",
    "destinations",
    "field_class",
    "fold",
    "guard_writes",
    "keys",
    "luhn",
    "number",
    "plan",
    "short_terms",
    "short_words",
    "text_classes",
    "tokens",
    "variants",
]
