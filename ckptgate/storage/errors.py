"""The target's one user-facing error, shared by the modules that check and use the target."""

from __future__ import annotations

__all__ = ["TargetError"]


class TargetError(Exception):
    """The target cannot take this run; the message is one line for the user."""
