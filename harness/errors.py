"""Errors and exit codes: they live on the ground floor (`contracts.errors`); this name stays
for the modules that import them from here."""

from contracts.errors import (
    EXIT_BAD_INPUT,
    EXIT_CRASH,
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    InputError,
    exit_code_for,
)

__all__ = ["EXIT_BAD_INPUT", "EXIT_CRASH", "EXIT_INVALID", "EXIT_UNKNOWN", "EXIT_VALID", "InputError",
           "exit_code_for"]
