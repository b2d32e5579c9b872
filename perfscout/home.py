"""The one home of perfscout's runs, checkpoints and saved snapshots.

``$PERFSCOUT_HOME`` when set (``~`` expanded), else the per-user data directory that
``platformdirs`` names for this OS (``~/.local/share/perfscout`` on Linux, honouring
``XDG_DATA_HOME``). One home per user, never inside the installed package and never the
current directory: ``perfscout runs`` then lists every run, wherever it was started.

This module imports nothing of perfscout, so every layer (tools, graph, cli) may call it.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_HOME = "PERFSCOUT_HOME"
APP_NAME = "perfscout"


def perfscout_home() -> Path:
    """Where runs (``runs/``), checkpoints and saved snapshots live; not created here."""
    configured = os.environ.get(ENV_HOME, "").strip()
    if configured:
        return Path(configured).expanduser()
    from platformdirs import user_data_path

    return user_data_path(APP_NAME, appauthor=False)


def runs_dir() -> Path:
    """``<home>/runs``: one directory per agent run, profile or sweep."""
    return perfscout_home() / "runs"


def home_source() -> str:
    """Why the home is where it is (for messages and ``perfscout codecs``/``runs``). The
    default home is one per user, so every perfscout process of that user (another shell, a
    batch job, a test run) writes its runs there too: said, with the way to keep a job apart."""
    if os.environ.get(ENV_HOME, "").strip():
        return f"${ENV_HOME}"
    return (f"the per-user data directory, shared by every perfscout process of this user: runs "
            f"started from other shells and jobs are here too; {ENV_HOME}=DIR gives a job a home of its own")
