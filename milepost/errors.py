"""Errors that reach the user as one line (the CLI prints them without a traceback and exits non-zero)."""


class MilepostError(Exception):
    """Base class of every error the command line reports as a one-line message."""


class InputError(MilepostError, ValueError):
    """Bad input: a malformed file, an unknown level, an impossible request, a bad config value."""
