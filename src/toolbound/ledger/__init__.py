"""The idempotency ledger: which writes happened, keyed by scope, version and key (R8, R19)."""
