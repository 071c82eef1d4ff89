"""A launch's one-line failures: `LaunchError`, a stable code from the TOOLING section of
alphac/codes.py and a message, raised by every part of the launch stage that refuses."""

from __future__ import annotations


class LaunchError(Exception):
    """A one-line launch failure with a stable code (TOOLING section of alphac/codes.py)."""

    def __init__(self, code: str, message: str):
        from alphac.codes import CATALOGUE

        assert code in CATALOGUE, code
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
