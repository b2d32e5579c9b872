"""`perfscout diagnose --ncu-csv F | --ncu-rep F | --perf-csv F [--json]`.

For now it lists what the profile holds (kernels with their parsed metrics, or the perf
counts) in the JSON shape of DESIGN.md; the diagnosis rules fill ``primary`` and
``findings``. Loading lives in :func:`perfscout.tools.profile.load_profiles`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from perfscout.cli.common import emit_json, stdout
from perfscout.tools.perf_stat import counters_unavailable_finding
from perfscout.tools.profile import kernel_json, load_profiles


def register(app: typer.Typer) -> None:
    @app.command("diagnose")
    def diagnose(
        ncu_csv: Path = typer.Option(None, "--ncu-csv", help="ncu --csv --page raw output."),
        ncu_rep: Path = typer.Option(None, "--ncu-rep", help="An .ncu-rep report (needs ncu here)."),
        ncu_details: Path = typer.Option(None, "--ncu-details", help="ncu --csv --page details output (rule messages)."),
        perf_csv: Path = typer.Option(None, "--perf-csv", help="perf stat -x, (or -j) output."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
        top: int = typer.Option(10, "--top", help="Kernels in the duration digest."),
    ) -> None:
        """Read a saved profile and list its kernels / counters with their evidence."""
        loaded = load_profiles(ncu_csv=ncu_csv, ncu_rep=ncu_rep, perf_csv=perf_csv, ncu_details=ncu_details)
        doc = {
            "kernels": [kernel_json(k, metrics=True) for k in loaded.kernels],
            "platform": loaded.platform,
            "digest": loaded.digest(top),
            "sources": loaded.sources,
            "warnings": loaded.warnings,
        }
        if loaded.perf is not None:
            finding = counters_unavailable_finding(loaded.perf)
            doc["perf"] = {**loaded.perf.model_dump(mode="json"),
                           "findings": [finding.model_dump(mode="json")] if finding else []}
        if json_out:
            emit_json(doc)
            return
        for d in doc["digest"]:
            share = f"{d['share_pct']:.1f}%" if d.get("share_pct") is not None else "?"
            stdout.print(f"{share:>6s}  {d['launches']:3d}x  {d['name']}")
        stdout.print(f"{len(loaded.kernels)} kernel launches; devices: "
                     + ", ".join(f"{d['name']} (CC {d['compute_capability']})" for d in loaded.platform["devices"]))
        if loaded.perf is not None:
            p = loaded.perf
            stdout.print(f"perf: {len(p.events)} events counted, {len(p.unavailable)} unavailable; "
                         f"hardware counters: {p.hardware_counters}")
