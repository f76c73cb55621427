"""The pure gates, in pipeline order: parse, validate, normalize, authorize, confirm (R3 to R7)."""
