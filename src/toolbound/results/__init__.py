"""Results back to the model and to people: encoding, truncation, redaction (R11, R12)."""
