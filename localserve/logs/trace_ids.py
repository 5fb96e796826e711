"""The trace of the traced request being served, for its log lines (tracing on only)."""

from __future__ import annotations

from contextvars import ContextVar

# (trace_id, span_id) as hex: JSON lines written while a traced request is served carry them.
trace_var: ContextVar[tuple[str, str] | None] = ContextVar("localserve_trace", default=None)
