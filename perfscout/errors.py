"""Errors that carry a message meant for the user.

Every bad input (wrong shape, impossible bound, corrupt stream, refused command, ...)
raises a subclass of :class:`PerfscoutError`; the CLI prints its message and exits
non-zero without a traceback. Anything else escaping is a bug.
"""


class PerfscoutError(Exception):
    """Base class: ``str(err)`` is a complete, actionable message."""


class InputError(PerfscoutError, ValueError):
    """Bad user input: shapes, dtypes, non-finite values, bounds, file contents."""


class CodecError(PerfscoutError):
    """A codec failed: unknown name, unsupported mode, corrupt or truncated stream."""


class CodecUnavailable(CodecError):
    """The backend library for a codec is not installed or not usable here."""


class ToolRefused(PerfscoutError):
    """The sandbox refused a command (not whitelisted, bad argument, path escape)."""
