"""`perfscout codecs [--json]`: every codec perfscout knows, what is installed here and why not.

For each backend of the registry (:func:`perfscout.codecs.registry.list_codecs`): the
library version, native modes and those perfscout derives from ``abs``, the devices it
runs on here (``szp-gpu``: cpu always, cuda only with CuPy and a GPU), and the reason a
backend or a device is missing, plus the numcodecs id under which it is usable from
numcodecs, Zarr and xarray. Installed plug-ins (``perfscout.codecs`` entry points) are
listed with the distribution that provides them, and each plug-in that could not be used
with the reason. Exit 0 (listing is not a verdict).
"""

from __future__ import annotations

from typing import Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from perfscout.cli.common import emit_json, stdout


def codec_rows() -> list[dict[str, Any]]:
    """The listing as plain dicts (the --json document's ``codecs``)."""
    from perfscout.codecs.registry import list_codecs

    numcodecs_ids = _numcodecs_ids()
    rows = []
    for info in list_codecs():
        row = info.model_dump(mode="json")
        row["derived_modes"] = [m for m in info.modes if m not in info.native_modes]
        row["numcodecs_id"] = numcodecs_ids.get(info.id)
        rows.append(row)
    return rows


def plugin_document() -> dict[str, Any]:
    """The scan of installed plug-ins (the --json document's ``plugins``)."""
    from perfscout.codecs.registry import plugin_listing

    return plugin_listing().model_dump(mode="json")


def _numcodecs_ids() -> dict[str, str]:
    try:
        from perfscout.codecs.numcodecs import NUMCODECS_IDS
    except ImportError:  # numcodecs itself missing: the codecs still work in perfscout
        return {}
    return dict(NUMCODECS_IDS)


def _devices_cell(row: dict[str, Any]) -> str:
    devices = row["devices"] or {row["device"] or "?": row["reason"] or "not importable"}
    return " ".join(f"[green]{d}[/]" if not why else f"[red]{d}✗[/]" for d, why in devices.items())


def _print_plugins(plugins: dict[str, Any]) -> None:
    group = plugins["group"]
    if not plugins["enabled"]:
        stdout.print(f"installed plug-ins ({group} entry points): not read in this process", highlight=False)
        return
    if not plugins["loaded"] and not plugins["failed"]:
        stdout.print(f"installed plug-ins ({group} entry points): none", highlight=False)
        return
    for p in plugins["loaded"]:
        stdout.print(f"plug-in [bold]{escape(p['id'])}[/] from {escape(p['distribution'])} "
                     f"({escape(p['value'])})", highlight=False)
    for f in plugins["failed"]:
        stdout.print(f"[red]plug-in {escape(f['id'])} from {escape(f['distribution'])} not used[/] "
                     f"({f['kind']}): {escape(f['reason'])}", highlight=False)


def _print(rows: list[dict[str, Any]]) -> None:
    table = Table(title="perfscout codecs", box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("codec", no_wrap=True, min_width=max((len(r["id"]) for r in rows), default=5))
    table.add_column("modes", overflow="fold")
    table.add_column("devices", no_wrap=True)
    table.add_column("version", overflow="fold")
    for r in rows:
        modes = " ".join(r["native_modes"] + [f"{m}*" for m in r["derived_modes"]]) or "-"
        table.add_row(escape(r["id"]), modes, _devices_cell(r), escape(r["version"] or "-"))
    stdout.print(table)
    stdout.print("modes*: derived by perfscout from the native abs mode; red ✗: not usable here (why: below)",
                 highlight=False)
    # One line per distinct reason, naming every codec or device it applies to.
    reasons: dict[str, list[str]] = {}
    for r in rows:
        for device, why in (r["devices"] or {r["device"] or "?": r["reason"]}).items():
            if why:
                label = r["id"] if len(r["devices"]) <= 1 else f"{r['id']} on {device}"
                reasons.setdefault(why, []).append(label)
    for why, labels in reasons.items():
        stdout.print(f"[bold]{escape(', '.join(labels))}[/]: {escape(why)}", highlight=False)
    usable = [r["numcodecs_id"] for r in rows if r["numcodecs_id"] and r["available"]]
    if usable:
        stdout.print("numcodecs / Zarr / xarray ids: " + ", ".join(usable)
                     + " (perfscout export prints a configuration)", highlight=False)


def codecs_command(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """List every codec: version, native and derived modes, devices, why one is missing."""
    rows = codec_rows()
    plugins = plugin_document()
    if as_json:
        emit_json({"codecs": rows, "plugins": plugins})
        return
    _print(rows)
    _print_plugins(plugins)


def register(app: typer.Typer) -> None:
    app.command("codecs")(codecs_command)
