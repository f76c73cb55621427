"""The pipeline: one proposal in, one typed outcome out, every gate in between.

Stages, in order, each a module over the call's typestate (:mod:`.call`)::

    admit    parse (R3) → look up (R2) → validate (R4) → normalize, digest (R5)
             → semantic check, resources, provenance, authorize (R6)
    confirm  [a person decides, bound to the digest (R7)]
    prepare  target check (R6) → idempotency claim (R8)
    execute  attempts under a deadline, the retry matrix (R9, R10)
    settle   the commit boundary → an ending; the output contract (R9, R11)
    endings  the typed outcomes, the ledger phase of each state (R2, R12, R14)

The gates are pure functions over frozen values; only execution, the ledger and the
stores do I/O. :class:`~toolbound.pipeline.runtime.Runtime` (``toolbound.Runtime``)
is the thin driver that runs them in order. The package itself imports nothing, so
each stage module can name its siblings without a cycle.
"""
