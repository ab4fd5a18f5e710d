"""leoguard's error type: every input or model error is a `LeoguardError` (a `ValueError`) whose
message names the offending field and value."""

from leoguard._core import LeoguardError

__all__ = ["LeoguardError"]
