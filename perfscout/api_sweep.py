"""Python API for campaigns: ``perfscout.sweep(spec)`` and ``perfscout.report(run_dir)``.

The code lives in :mod:`perfscout.sweep.api` (tools may call it; nothing below the
top layer imports this module); this name stays for the README's Python API and scripts.
"""

from perfscout.sweep.api import default_run_dir, read_sweep_data, report, sweep

__all__ = ["default_run_dir", "read_sweep_data", "report", "sweep"]
