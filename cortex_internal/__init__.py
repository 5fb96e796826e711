"""Cortex's ``cortex_internal`` package, as far as user code used it (seed 001): the JSON logger."""
