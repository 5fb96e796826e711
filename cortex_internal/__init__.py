"""Cortex's ``cortex_internal`` package, as far as user code used it (Cortex 0.25-0.33 docs, *Predictors*): the JSON logger."""
