"""The fixtures of the logs' tests."""

from tests.logs.captured import captured

__all__ = ["captured"]
