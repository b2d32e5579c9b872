"""`perfscout datasets list [--json]`: the named datasets and whether they load here;
`perfscout datasets inspect FILE [--json]`: the variables of a netCDF/HDF5/Zarr file."""

from __future__ import annotations

from pathlib import Path

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from perfscout.cli.common import emit_json, fail, stdout
from perfscout.datasets.files import describe_file, file_kind
from perfscout.datasets.registry import (
    ENV_SDRBENCH_DIR,
    list_datasets,
    shared_data_candidates,
    shared_data_dir,
)
from perfscout.datasets.synthetic import generator_listing
from perfscout.errors import PerfscoutError

datasets_app = typer.Typer(
    name="datasets",
    help="Named datasets: shared real fields, SDRBench downloads, synthetic generators.",
    no_args_is_help=True,
)


_KIND_SHORT = {"synthetic": "synth"}


def _human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


@datasets_app.command("list")
def list_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """List every registered dataset, whether it is available here, and why not."""
    try:
        infos = list_datasets()
    except PerfscoutError as exc:
        fail(escape(str(exc)))  # messages quote registry text that rich would read as markup
    found = shared_data_dir()
    if as_json:
        emit_json(
            {
                "datasets": [i.model_dump() for i in infos],
                "shared_data_dir": str(found) if found else None,
                "shared_data_searched": [str(c) for c in shared_data_candidates()],
                "generators": generator_listing().model_dump(mode="json"),
            }
        )
        return
    # Fits 80 columns: short columns without vertical rules, names never cut (they are
    # what users type), kinds abbreviated with a legend; descriptions and the long
    # "why not" reasons follow as wrapped lines (all of it is in --json too).
    table = Table(title="perfscout datasets", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("name", "kind", "shape", "dtype", "size", "here"):
        table.add_column(col, no_wrap=True)
    table.columns[0].min_width = max((len(i.name) for i in infos), default=4)
    for i in infos:
        table.add_row(
            i.name,
            _KIND_SHORT.get(i.kind, i.kind),
            "x".join(str(d) for d in i.shape),
            i.dtype,
            _human_bytes(i.nbytes),
            "[green]yes[/]" if i.available else "[red]no[/]",
        )
    stdout.print(table)
    stdout.print("kind: shared = real field in the shared data folder, remote = SDRBench download, "
                 "synth = generated; here: loads on this machine (why not: below)", highlight=False)
    for i in infos:
        note = i.description if i.available else i.reason
        stdout.print(f"[bold]{escape(i.name)}[/]: {escape(note)}", highlight=False)
    stdout.print(
        f"shared data: {escape(str(found)) if found else 'not found'}; SDRBench downloads: set {ENV_SDRBENCH_DIR}; "
        "synthetic specs: KIND:SHAPE[:DTYPE], e.g. grf:64,64,64",
        highlight=False,
    )
    _print_generators()


def _print_generators() -> None:
    """Installed synthetic-field generators (``perfscout.datasets`` entry points)."""
    listing = generator_listing()
    for p in listing.loaded:
        stdout.print(f"synthetic kind [bold]{escape(p.id)}[/] from {escape(p.distribution)} "
                     f"({escape(p.value)}): {escape(p.id)}:SHAPE[:DTYPE]", highlight=False)
    for f in listing.failed:
        stdout.print(f"[red]generator {escape(f.id)} from {escape(f.distribution)} not used[/] "
                     f"({f.kind}): {escape(f.reason)}", highlight=False)


@datasets_app.command("inspect")
def inspect_cmd(
    path: Path = typer.Argument(..., help="A netCDF, HDF5 or Zarr file (or Zarr store folder)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """List a file's variables: shape, stored and unpacked dtype, CF packing and masks."""
    try:
        infos = describe_file(path)
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    if as_json:
        emit_json({"path": str(path), "format": file_kind(path),
                   "variables": [i.model_dump() for i in infos]})
        return
    table = Table(title=f"{escape(str(path))} ({file_kind(path)})")
    for col in ("variable", "shape", "stored", "unpacked", "packed", "masks", "units"):
        table.add_column(col, overflow="fold")
    for i in infos:
        table.add_row(
            escape(i.name), "x".join(str(d) for d in i.shape) + (f" ({','.join(i.dims)})" if i.dims else ""),
            i.dtype_on_disk + (" big-endian" if i.byte_order == "big" else ""),
            i.dtype_unpacked or "-", "yes" if i.packed else "", escape(", ".join(i.masked_by)), escape(i.units),
        )
    stdout.print(table)
    for i in infos:
        for line in ([i.reason] if not i.loadable else []) + i.notes:
            stdout.print(f"[bold]{escape(i.name)}[/]: {escape(line)}", highlight=False)
    stdout.print("evaluate one with: perfscout eval --data FILE --var NAME --codec ... --mode ... --bound ...",
                 highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(datasets_app, name="datasets")
