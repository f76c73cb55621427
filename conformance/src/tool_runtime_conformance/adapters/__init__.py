"""Adapters the kit ships: toolbound's library runtime, and a naive runtime to copy."""
