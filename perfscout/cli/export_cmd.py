"""`perfscout export [DIR] [--codec --mode --bound --dataset] [--check DATA [--var NAME]] [--json]`.

From a sweep directory (``results.sqlite``) or an agent run directory (``results.json``):
the best ratio whose bound held, or the row the filters name; without DIR, the codec, mode
and bound given. Prints each target's configuration (numcodecs JSON, the Zarr v3 codec
pipeline, h5py + hdf5plugin filter arguments, xarray encoding) and paste-ready Python.
``--check DATA`` writes DATA with each target's own library, reads it back from disk and
verifies the bound element by element and the ratio storage achieved. Exit 0 ok; 1 a
check found a broken bound or no compression, or a store DIR is read from is damaged
(named as ``perfscout report`` names it, with what is still on disk; nothing is written
to it); 2 bad input.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from perfscout.cli.common import emit_json, fail, stderr, stdout
from perfscout.errors import InputError, PerfscoutError


def _load_check_data(spec: str, shape: str | None, dtype: str | None, endian: str,
                     var: str | None = None) -> tuple[Any, str]:
    """The --check field: a file (.npy, raw with --shape/--dtype, a netCDF/HDF5/Zarr variable
    named by --var, through the dataset loaders), a dataset name, or a synthetic KIND:SHAPE."""
    import perfscout.datasets as ds
    from perfscout.cli.eval_cmd import load_input

    path = Path(spec)
    if var is not None and not path.exists():
        raise InputError(f"--var names a variable of a --check file (netCDF, HDF5 or Zarr); {spec!r} is not a file")
    if path.exists():
        field = load_input(path, None, None, shape, dtype, endian, var=var)
    elif ":" in spec:
        field = load_input(None, spec.removeprefix("synthetic:"), None, None, None, endian)
    else:
        try:
            field = ds.get_dataset(spec)
        except PerfscoutError as exc:
            raise InputError(f"--check {spec!r} is not a file, a dataset name or KIND:SHAPE: {exc}") from exc
    array = getattr(field, "array", field)
    return array, getattr(field, "name", spec)


def _parse_chunks(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        chunks = tuple(int(c) for c in text.split(","))
    except ValueError as exc:
        raise InputError(f"--chunks takes Z,Y,X integers, got {text!r}") from exc
    if not chunks or min(chunks) < 1:
        raise InputError(f"--chunks must be positive integers, got {text!r}")
    return chunks


def _print(setting: Any, configs: dict[str, Any] | None, snips: dict[str, str], checks: list[Any],
           note: str) -> None:
    import json

    s = setting
    where = f" from {s.source}" if s.source != "given" else ""
    expected = f", ratio {s.expected_ratio:.3g} there" if s.expected_ratio else ""
    stdout.print(f"[bold]{escape(s.codec)} {escape(s.mode)} {s.bound:g}[/] ({s.dtype}"
                 + (f", value range {s.value_range:.6g}" if s.value_range is not None else "")
                 + f"){escape(where)}" + (f" on {escape(s.dataset)}" if s.dataset else "") + expected,
                 highlight=False)
    for n in list(s.notes) + ([note] if note else []):
        stdout.print(f"note: {escape(n)}", highlight=False)
    for target, code in snips.items():
        stdout.rule(f"{target}", align="left")
        if configs and target in configs:
            stdout.print(escape(json.dumps(configs[target])), highlight=False, soft_wrap=True)
        stdout.print(escape(code), highlight=False, soft_wrap=True, end="")
    if configs is None:
        stdout.print("[dim]JSON configurations need the value range: --value-range R or --check DATA[/]")
    if "hdf5" not in snips:
        stdout.print(f"[dim]hdf5: no HDF5 filter runs {escape(s.codec)} {escape(s.mode)}[/]")
    if checks:
        table = Table("target", "status", "ratio", "vs eval", "max err", "bound", title="--check: written, read back",
                      box=box.SIMPLE_HEAD, pad_edge=False)
        for c in checks:
            table.add_row(c.target, c.status, _g(c.ratio), _g(c.ratio_vs_expected), _g(c.max_abs_err),
                          _g(c.abs_bound))
        stdout.print(table)
        for c in checks:
            if c.message and c.status != "ok":
                stdout.print(f"[bold]{c.target}[/]: {escape(c.message)}", highlight=False)


def refuse_damaged_stores(source: str | Path, reads: str, done: str = "exported") -> None:
    """Exit 1 naming the damage when a store ``source`` would be read from is damaged, as
    ``perfscout report`` names it (:func:`perfscout.sweep.api.check_store`: unreadable, empty,
    truncated, a table lost, or not holding the task results stored in ``raw/``), with the
    run directories still on disk and ``perfscout report --rebuild``; and when an agent run
    directory lacks ``reads`` (it did not finish) while the checkpoint store it would be
    resumed from is damaged. Only reads: a damaged store is never opened for writing."""
    from perfscout.graph.checkpoint import CheckpointStoreDamaged, check_checkpoint_store
    from perfscout.graph.context import Context
    from perfscout.sweep.api import StoreDamaged, check_store
    from perfscout.tools.results_store import STORE_NAME

    path = Path(source).expanduser()
    if path.is_file() and path.name == STORE_NAME:
        path = path.parent
    if not path.is_dir():
        return
    sweeps = [path] if (path / STORE_NAME).is_file() else sorted(p.parent for p in path.glob(f"sweeps/*/{STORE_NAME}"))
    for run_dir in sweeps:
        try:
            check_store(run_dir)
        except StoreDamaged as exc:
            said = str(exc).replace("nothing was reported", f"nothing was {done}").rstrip(".")
            fail(escape(f"{said}.{_still_on_disk(run_dir, sweeps)}"), code=1)
    if (path / "request.json").is_file() and not (path / reads).exists():
        try:
            check_checkpoint_store(Context())
        except CheckpointStoreDamaged as exc:
            fail(escape(f"{path} is an agent run that did not finish (no {reads}), and it cannot be resumed: {exc}; "
                        f"its observations so far are in {path / 'results'}"), code=1)


def _still_on_disk(run_dir: Path, sweeps: list[Path]) -> str:
    """The task results in ``raw/`` and the other sweeps of the run, named."""
    tasks = sorted(p.parent.name for p in (run_dir / "raw").glob("*/result.json"))
    said = (f" Task results still on disk in {run_dir / 'raw'}: {', '.join(tasks[:6])}"
            f"{f' ... ({len(tasks)})' if len(tasks) > 6 else ''}." if tasks else "")
    others = [str(d) for d in sweeps if d != run_dir]
    if others:
        said += f" The run's other sweep directories: {', '.join(others[:6])}{' ...' if len(others) > 6 else ''}."
    return said


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def export_command(
    source: Path | None = typer.Argument(None, help="A sweep or agent run directory (else give --codec/--mode/--bound)."),
    codec: str | None = typer.Option(None, "--codec", help="Codec id (see `perfscout codecs`), or a filter on DIR."),
    mode: str | None = typer.Option(None, "--mode", help="abs | rel | pw_rel | fixed_rate (with DIR also psnr, ratio)."),
    bound: float | None = typer.Option(None, "--bound", help="The bound in that mode, or a filter on DIR."),
    dataset: str | None = typer.Option(None, "--dataset", help="With DIR: only rows of this dataset."),
    dtype: str = typer.Option("f32", "--dtype", help="f32 or f64 (the data's type; also --check raw data's)."),
    value_range: float | None = typer.Option(None, "--value-range", help="rel: R (max - min) of your field."),
    nonfinite: str = typer.Option("refuse", "--nonfinite", help="refuse | passthrough (store NaN/Inf exactly)."),
    target: list[str] = typer.Option([], "--target", help="numcodecs | zarr | xarray | hdf5 (repeatable; default all)."),
    check: str | None = typer.Option(None, "--check", metavar="DATA",
                                     help="Write DATA (file, dataset name or KIND:SHAPE) with each target, read back, verify."),
    var: str | None = typer.Option(None, "--var", help="The variable of a netCDF/HDF5/Zarr --check file, e.g. z."),
    shape: str | None = typer.Option(None, "--shape", help="Z,Y,X of raw --check data."),
    endian: str = typer.Option("little", "--endian", help="Byte order of raw --check data."),
    chunks: str | None = typer.Option(None, "--chunks", help="Chunk shape for --check (default: whole array up to 16 MiB)."),
    keep: Path | None = typer.Option(None, "--keep", help="Keep the --check files in this folder."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Export a verified setting as numcodecs / Zarr v3 / xarray / HDF5 configuration."""
    from perfscout.tools import export as ex

    try:
        targets = tuple(target) or ex.TARGETS
        unknown = [t for t in targets if t not in ex.TARGETS]
        if unknown:
            raise InputError(f"--target must be one of {', '.join(ex.TARGETS)}, got {', '.join(unknown)}")
        if source is not None:
            refuse_damaged_stores(source, "results.json")
            setting = ex.choose_setting(source, codec=codec, mode=mode, bound=bound, dataset=dataset)
            if nonfinite != "refuse":
                setting = setting.model_copy(update={"nonfinite": nonfinite})
        else:
            missing = [n for n, v in (("--codec", codec), ("--mode", mode), ("--bound", bound)) if v is None]
            if missing:
                raise InputError(f"give a sweep/run directory, or {', '.join(missing)}")
            setting = ex.make_setting(codec, mode, bound, dtype=dtype, value_range=value_range,  # type: ignore[arg-type]
                                      nonfinite=nonfinite)
        checks, note = [], ""
        if var is not None and check is None:
            raise InputError("--var names the variable of the --check file: give --check FILE too")
        if check is not None:
            data, name = _load_check_data(check, shape, dtype, endian, var)
            setting = ex.resolve_for_data(setting, data)
            note = f"--check data: {name} {data.dtype} {tuple(data.shape)}"
            with tempfile.TemporaryDirectory(prefix="perfscout-export-") as tmp:
                folder = keep if keep is not None else Path(tmp)
                checks = ex.check(setting, data, folder, targets=targets, chunks=_parse_chunks(chunks))
        try:
            configs: dict[str, Any] | None = {k: v for k, v in ex.configs(setting).items() if k in targets}
        except InputError:  # rel without a value range: the snippets compute it from the data
            configs = None
        snips = {k: v for k, v in ex.setting_snippets(setting).items() if k in targets}
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    except OSError as exc:
        fail(escape(f"cannot read or write a file: {exc}"))
    if as_json:
        emit_json({"setting": setting.model_dump(mode="json"), "configs": configs, "snippets": snips,
                   "check": [c.model_dump(mode="json") for c in checks], "note": note})
    else:
        _print(setting, configs, snips, checks, note)
        if keep is not None and checks:
            stderr.print(f"check files kept in {escape(str(keep))}")
    if any(c.status not in ("ok", "not_applicable") for c in checks):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
