"""`perfscout eval`: one codec on one field, verified; and `perfscout decompress`.

``eval`` reads a raw binary file (``--data`` with ``--shape``/``--dtype``), a variable of a
netCDF/HDF5/Zarr file (``--data FILE --var NAME``, CF-decoded; see
:func:`perfscout.datasets.load_variable`), a synthetic field (``--synthetic KIND:SHAPE``)
or a registry dataset (``--dataset NAME``), runs
:func:`perfscout.tools.evaluate.evaluate_full` and prints the record (``--json``: the
record, one JSON document, alone on stdout) or a table. Exit status: 0 when the
result's status is ``ok``, 1 when it was measured but is not (bound violated or
overshot, codec error), 2 for bad input. ``--save-compressed FILE`` writes the stream
in perfscout's container (:mod:`perfscout.codecs.framing`); ``decompress`` reads it
back, rejecting truncated or corrupt files with a clear message.
"""

from __future__ import annotations

import math
import signal
from pathlib import Path
from typing import Any

import numpy as np
import typer
from rich.markup import escape
from rich.table import Table

from perfscout.cli.common import emit_json, fail, refuse_overwriting_inputs, stderr, stdout
from perfscout.errors import InputError, PerfscoutError
from perfscout.io import write_atomic


def parse_options(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE pairs -> dict (numbers become numbers)."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--option takes KEY=VALUE, got {item!r}")
        parsed: Any = value
        for cast in (int, float):
            try:
                parsed = cast(value)
                break
            except ValueError:
                continue
        options[key] = parsed
    return options


def load_input(data: Path | None, synthetic: str | None, dataset: str | None,
               shape: str | None, dtype: str | None, endian: str, var: str | None = None,
               fill_masked: float | None = None, nonfinite: str = "refuse") -> Any:
    """The field to evaluate, from exactly one of the three sources.

    Non-finite values are let through here: the evaluation's ``--nonfinite`` policy
    decides what happens to them, with a message that names the way out. Masked points
    of a file variable (fill, missing, out of the valid range) are refused, counted,
    unless ``--fill-masked`` fills them or ``--nonfinite passthrough`` keeps them aside.
    """
    import perfscout.datasets as ds

    given = [name for name, v in (("--data", data), ("--synthetic", synthetic), ("--dataset", dataset)) if v]
    if len(given) != 1:
        raise InputError("give exactly one of --data FILE, --synthetic KIND:SHAPE or --dataset NAME"
                         + (f" (got {', '.join(given)})" if given else ""))
    if (var is not None or fill_masked is not None) and data is None:
        raise InputError("--var and --fill-masked name a variable of a --data file (netCDF, HDF5 or Zarr)")
    if synthetic:
        ref = ds.synthetic_ref(synthetic)
    elif dataset:
        ref = ds.DataRef(source="name", name=dataset)
    else:
        assert data is not None
        if var is not None and data.exists() and ds.file_kind(data) not in ("netcdf", "hdf5", "zarr"):
            raise InputError(f"--var needs a netCDF, HDF5 or Zarr file; {data} is "
                             f"{ds.file_kind(data) or 'not a readable file'}")
        ref = ds.file_ref(data, shape=shape, dtype=dtype, endian=endian, var=var,
                          masked=ds.masked_policy(fill_masked, nonfinite))
        if ref.missing():  # a raw file (a .npy file carries its own shape and dtype)
            raise InputError("--data needs --shape Z,Y,X and --dtype f32|f64 (raw binary, C order)"
                             + _shapes_the_size_allows(data, shape, dtype))
    return ds.open(ref)


def display_name(data: Path | None, synthetic: str | None, dataset: str | None, shape: str | None,
                 dtype: str | None, endian: str, var: str | None, field: Any) -> str:
    """The record's ``dataset``: the display name a sweep and the agent give the same data
    (:func:`perfscout.datasets.describe`'s label: the file name, ``file.nc:var``,
    ``KIND:SHAPE``, the registry name)."""
    import perfscout.datasets as ds

    if synthetic:
        ref = ds.synthetic_ref(synthetic)
    elif dataset:
        return dataset
    else:
        assert data is not None
        ref = ds.file_ref(data, shape=shape, dtype=dtype, endian=endian, var=var)
    try:
        return ds.describe(ref).label
    except PerfscoutError:  # read already; only its name is wanted
        return getattr(field, "name", "") or str(data or synthetic)


def _shapes_the_size_allows(data: Path, shape: str | None, dtype: str | None) -> str:
    """What the file's byte count allows, as the agent proposes it when it asks for the shape
    (the same guesser: graph.understand.assess), e.g. "; its 2985984 bytes fit
    --shape 91,91,91 --dtype f32"; "" when nothing fits or the file cannot be sized."""
    from perfscout.datasets.field import parse_dtype
    from perfscout.graph.understand.assess import _guess_shapes

    try:
        size = data.stat().st_size
        tag = None if dtype is None else {4: "f32", 8: "f64"}[parse_dtype(dtype).itemsize]
    except (OSError, PerfscoutError, ValueError, KeyError):
        return ""
    options = []
    for guess in _guess_shapes(data, size, tag):
        dims, kind = guess.split(" ")
        given = shape.replace(" ", "") if shape else None
        if given and given != dims.replace("x", ","):
            continue  # the shape was given: only the dtypes that fit it
        options.append(f"--shape {dims.replace('x', ',')} --dtype {'f32' if kind == 'float32' else 'f64'}")
    if not options:
        return ""
    return f"; its {size} bytes fit " + " or ".join(options)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _print_table(ev: Any) -> None:
    r = ev.result
    table = Table(title=f"{r.codec} on {r.dataset} ({r.shape} {r.dtype})", show_header=True)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    rows = [
        ("mode / bound", f"{r.mode} {r.bound:g}"), ("abs bound enforced", _fmt(r.abs_bound)),
        ("status", r.status), ("bound_ok", _fmt(r.bound_ok)),
        ("ratio", _fmt(r.ratio)), ("bitrate (bits/value)", _fmt(r.bitrate)),
        ("max abs err", _fmt(r.max_abs_err)),
        ("  at index", _fmt(ev.check.max_abs_err_index if ev.check else None)),
        ("max rel err (R)", _fmt(r.max_rel_err)), ("max pw rel err", _fmt(r.max_pw_rel_err)),
        ("PSNR (dB)", _fmt(r.psnr)), ("NRMSE", _fmt(r.nrmse)), ("SSIM", _fmt(r.ssim)),
        ("pearson", _fmt(r.pearson)),
        ("compress", f"{_fmt(r.compress_s)} s  {_fmt(r.compress_MBps)} MB/s"),
        ("decompress", f"{_fmt(r.decompress_s)} s  {_fmt(r.decompress_MBps)} MB/s"),
        ("codec", f"{r.codec} {r.codec_version} on {r.device} ({r.device_name})"),
        ("repeats", str(r.repeats)),
    ]
    for timing, name in ((ev.compress_timing, "compress"), (ev.decompress_timing, "decompress")):
        if timing is not None and (timing.noisy or timing.too_small):
            flag = "timing_noisy" if timing.noisy else "too_small_to_time"
            rows.append((f"{name} timing", f"{flag} (cv {timing.cv:.2f}, median {timing.median_s:.3g} s)"))
    for key, value in rows:
        table.add_row(key, value)
    stdout.print(table)
    for note in ev.notes:
        stdout.print(f"note: {escape(note)}")
    if r.error:  # escaped: messages quote values like [1, 2] that rich would read as markup
        text = escape(r.error)
        stdout.print(text if r.error.startswith(r.status) else f"[bold]{r.status}[/]: {text}")


def eval_command(
    data: Path | None = typer.Option(None, "--data", help="Raw binary file (C order), or a netCDF/HDF5/Zarr file with --var."),
    var: str | None = typer.Option(None, "--var", help="Variable of a netCDF/HDF5/Zarr --data file, e.g. z or /group/temp."),
    fill_masked: float | None = typer.Option(None, "--fill-masked", help="Fill a --var's masked points with this value."),
    shape: str | None = typer.Option(None, "--shape", help="Z,Y,X for --data (slowest axis first)."),
    dtype: str | None = typer.Option(None, "--dtype", help="f32 or f64 for --data (with --var: default CF's type)."),
    endian: str = typer.Option("little", "--endian", help="Byte order of --data: little or big."),
    synthetic: str | None = typer.Option(None, "--synthetic", help="KIND:SHAPE, e.g. grf:64,64,64."),
    dataset: str | None = typer.Option(None, "--dataset", help="A name from `perfscout datasets list`."),
    codec: str = typer.Option(..., "--codec", help="Codec id (see the codec registry)."),
    mode: str = typer.Option(..., "--mode", help="abs | rel | pw_rel | psnr | ratio | fixed_rate"),
    bound: float = typer.Option(..., "--bound", help="The bound in that mode (dB for psnr, CR for ratio)."),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
    repeats: int = typer.Option(3, "--repeats", help="Timed repeats after one warm-up."),
    nonfinite: str = typer.Option("refuse", "--nonfinite", help="refuse | passthrough (NaN/Inf)."),
    option: list[str] = typer.Option([], "--option", help="Codec option KEY=VALUE (repeatable)."),
    save_compressed: Path | None = typer.Option(None, "--save-compressed", help="Write the stream here."),
    as_json: bool = typer.Option(False, "--json", help="Print the record as one JSON document."),
) -> None:
    """Compress one field with one codec, verify the bound element by element, time it."""
    from perfscout.codecs.framing import to_bytes

    writes_fail_cleanly()
    from perfscout.tools.evaluate import evaluate_full

    try:
        refuse_overwriting_inputs(save_compressed, data)  # before the measurement, not after it
        field = load_input(data, synthetic, dataset, shape, dtype, endian, var, fill_masked, nonfinite)
        ev = evaluate_full(
            field, codec, mode, bound, device=device, repeats=repeats, nonfinite=nonfinite,
            options=parse_options(option), keep_reconstruction=False,
            dataset=display_name(data, synthetic, dataset, shape, dtype, endian, var, field),
        )
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    except OSError as exc:
        fail(escape(f"cannot read a file: {exc}"))
    ev.notes[:0] = getattr(field, "notes", [])  # what loading did (CF unpacking, masks, dtype)
    if as_json:  # the measurement is printed first: a failed save below loses nothing
        emit_json(ev.result.row())
        for note in getattr(field, "notes", []):
            stderr.print(f"note: {escape(note)}", highlight=False)
    else:
        _print_table(ev)
    if save_compressed is not None and ev.compressed is not None:
        try:
            write_file_atomic(save_compressed, [to_bytes(ev.compressed, ev.sections())])
        except (OSError, PerfscoutError) as exc:
            fail(escape(f"cannot write the compressed stream: {exc}"))
        stderr.print(f"compressed stream written to {escape(str(save_compressed))}")
    if ev.result.status != "ok":
        raise typer.Exit(1)


def decompress_command(
    path: Path = typer.Argument(..., help="A file written by `perfscout eval --save-compressed`."),
    out: Path = typer.Option(..., "--out", help="Where to write the raw values (C order, little-endian)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON summary."),
) -> None:
    """Decode a perfscout compressed file back to raw binary."""
    writes_fail_cleanly()
    try:
        summary = decompress_file(path, out)
    except PerfscoutError as exc:
        fail(escape(str(exc)))
    except OSError as exc:
        fail(escape(f"cannot read or write a file: {exc}"))
    if as_json:
        emit_json(summary)
    else:
        stdout.print(f"wrote {summary['out']}: {summary['dtype']} shape {summary['shape']} "
                     f"({summary['codec']}, {summary['nonfinite']} non-finite restored)")


def decompress_file(path: Path, out: Path) -> dict[str, Any]:
    """Decode a container file to raw little-endian binary; returns a summary."""
    from perfscout.codecs.framing import from_bytes
    from perfscout.codecs.registry import codec_class
    from perfscout.codecs.streams import check_stream_header
    from perfscout.io import available_bytes
    from perfscout.tools.bounds import unpack_nonfinite
    from perfscout.tools.isolate import run_isolated

    if not path.is_file():
        raise InputError(f"compressed file not found: {path}")
    refuse_overwriting_inputs(out, path)
    from perfscout.io import read_input_bytes

    # sized before it is read: a sparse file (holes read as gigabytes of zeros) is refused
    compressed, sections = from_bytes(read_input_bytes(path, "compressed file", dense=True))
    cls = codec_class(compressed.codec_id)
    # The stream's own header must agree with the container before any decoder runs
    # (a forged shape or codec id is refused here), and the decoder runs in a child
    # process: if a stream still crashes it, that is an error message, not our death.
    check_stream_header(compressed)
    nbytes = math.prod(compressed.shape) * np.dtype(compressed.dtype).itemsize
    # A header can claim any size (a forged one, petabytes): refused before anything is
    # allocated for it. Decoding holds the values and their little-endian copy.
    have = available_bytes()
    if 2 * nbytes > have:
        raise InputError(f"{path}: the stream decodes to {compressed.dtype} shape {tuple(compressed.shape)}, "
                         f"{nbytes / 2**30:.3g} GiB; decoding it needs about {2 * nbytes / 2**30:.3g} GiB and "
                         f"{have / 2**30:.3g} GiB is available here")
    values = run_isolated(
        _decode, (cls, compressed), what=f"decoding a {compressed.codec_id} stream", device=cls.device,
        input_array=None, result_nbytes=nbytes,
    )
    restored = unpack_nonfinite(sections, compressed.shape, values.dtype)
    if restored is not None:
        mask, nonfinite = restored
        values = values.copy()
        values[mask] = nonfinite
    write_file_atomic(out, [values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes()])
    return {
        "out": str(out), "codec": compressed.codec_id, "shape": list(compressed.shape),
        "dtype": np.dtype(compressed.dtype).name, "nonfinite": 0 if restored is None else int(restored[0].sum()),
    }


def _decode(cls: Any, compressed: Any) -> np.ndarray:
    """In the child process: the codec's own decoder."""
    return np.asarray(cls(compressed.mode, compressed.bound).decompress(compressed))


def writes_fail_cleanly() -> None:
    """A file-size limit (RLIMIT_FSIZE) kills a process with SIGXFSZ by default; ignored,
    the write fails with EFBIG instead, which is reported like a full disk."""
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    except (AttributeError, ValueError, OSError):  # not POSIX, or not the main thread
        pass


def write_file_atomic(path: Path, chunks: list[bytes]) -> None:
    """Write ``chunks`` to a temp file beside ``path``, then rename: a full disk (or a
    size limit) leaves the old file, or none, never a truncated one."""
    if path.is_dir():
        raise InputError(f"cannot write {path}: it is a directory")
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: the directory {path.parent} does not exist")
    write_atomic(path, chunks)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
    app.command("decompress")(decompress_command)
