"""Where perfscout's log records go when it runs as a command: rich-formatted, on stderr.

Modules log through the standard library (``log = logging.getLogger(__name__)``) and
never configure handlers: a library user's own logging set-up stays theirs. The CLI calls
:func:`configure_logging` once per invocation from the global options:

=================  ================================================================
(default)          warnings and errors
``--verbose``      + progress (INFO: which step runs, what was written) and
                   diagnostics (DEBUG: commands run, fallbacks taken, rules fired)
``--quiet``        errors only
=================  ================================================================

Only perfscout's loggers are set; the libraries underneath keep Python's default (their
warnings still reach stderr).

stdout is never touched: ``--json`` keeps printing exactly one document there.
"""

from __future__ import annotations

import logging

#: The logger every perfscout module's logger descends from.
PACKAGE_LOGGER = "perfscout"


def level_for(verbose: bool = False, quiet: bool = False) -> int:
    """The level of perfscout's own loggers for the CLI's ``--verbose`` and ``--quiet``."""
    if quiet:
        return logging.ERROR  # --quiet wins: a script asked for silence
    return logging.DEBUG if verbose else logging.WARNING


def configure_logging(verbose: bool = False, quiet: bool = False) -> logging.Handler:
    """Send perfscout's log records to stderr through rich; return the handler installed.

    Calling it again replaces the handler it installed before (tests and long-lived shells
    invoke the CLI many times in one process), never one installed by someone else.
    """
    from rich.console import Console
    from rich.logging import RichHandler

    logger = logging.getLogger(PACKAGE_LOGGER)
    for old in [h for h in logger.handlers if getattr(h, "_perfscout_cli", False)]:
        logger.removeHandler(old)
    # Console(stderr=True) looks sys.stderr up at every write, so a redirected stderr is honoured.
    handler = RichHandler(console=Console(stderr=True), show_path=False, markup=False,
                          rich_tracebacks=False, log_time_format="[%X]")
    handler._perfscout_cli = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level_for(verbose, quiet))
    logger.propagate = False  # printed once, here, not again by a root handler
    return handler
