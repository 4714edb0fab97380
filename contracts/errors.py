"""Errors the CLI turns into exit codes.

`InputError` is bad input (a file, a line, an argument): the CLI prints its one-line
message (``wrack: error: FILE:LINE: what was wrong``) and exits 254, never a traceback.
"""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_INPUT = 254
EXIT_CRASH = 255


class InputError(Exception):
    """Bad input: `message` says what was wrong, `path`/`line` say where (both optional)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}:{self.line}: " if self.line is not None else f"{self.path}: "
        return f"{where}{self.message}"


def exit_code_for(valid: object) -> int:
    """Jepsen's exit codes for a checker verdict: True 0, False 1, anything else ('unknown') 2."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
