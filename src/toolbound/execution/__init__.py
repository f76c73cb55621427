"""Executing an admitted invocation: the tool protocol and the commit boundary (R9)."""
