"""From an evaluated setting to using it: numcodecs, Zarr v3, xarray and HDF5 configuration.

- :func:`choose_setting` picks a setting from a sweep directory (``results.sqlite``) or an
  agent run directory (``results.json``): the best ratio among results whose bound held, or
  the row a filter (codec / mode / bound / dataset) names.
- :func:`configs` gives each target's machine-readable configuration, :func:`snippets` the
  Python a user pastes (``snippets(codec, mode, bound, dtype=...)`` also ends the agent's
  report).
- :func:`check` writes a sample with each target's own library (numcodecs, zarr, xarray,
  h5py + hdf5plugin), reads it back from disk, and verifies the bound element by element
  and the ratio that storage really achieved.

Modes: a stored setting uses the codec's native mode. ``rel`` is resolved to an absolute
bound with the field's value range (chunks cannot see it); ``psnr``/``ratio`` results
export the absolute bound their search settled on, for that field.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from perfscout.errors import InputError

TARGETS = ("numcodecs", "zarr", "xarray", "hdf5")
_DTYPES = {"f32": "float32", "f64": "float64", "float32": "float32", "float64": "float64"}
_SEARCHED = ("psnr", "ratio")
_NATIVE_EXPORT = ("abs", "rel", "pw_rel", "fixed_rate")


class Setting(BaseModel):
    """One codec setting to export: what to configure and where it came from."""

    codec: str  # perfscout backend id (sz3, sz2, sz3-h5, zfp, szp-gpu)
    mode: str  # abs | rel | pw_rel | fixed_rate (rel: relative to value_range)
    bound: float
    dtype: str = "float32"
    value_range: float | None = None  # for rel: R of the field the bound refers to
    nonfinite: str = "refuse"
    source: str = "given"  # where it came from: "given", or a run directory and row
    dataset: str = ""
    expected_ratio: float | None = None  # the ratio perfscout measured for it, if any
    notes: list[str] = []

    @property
    def abs_bound(self) -> float | None:
        if self.mode == "abs":
            return self.bound
        if self.mode == "rel" and self.value_range is not None:
            return self.bound * self.value_range
        return None


def make_setting(codec: str, mode: str, bound: float, *, dtype: str = "f32", value_range: float | None = None,
                 nonfinite: str = "refuse") -> Setting:
    """A setting given directly; validated against the codec's native modes."""
    from perfscout.codecs.registry import codec_class

    if mode in _SEARCHED:
        raise InputError(f"mode {mode!r} is searched per field: export it from a sweep or run that evaluated it "
                         "(perfscout export DIR), which knows the absolute bound it settled on, or use abs/rel")
    if mode not in _NATIVE_EXPORT:
        raise InputError(f"mode must be one of {', '.join(_NATIVE_EXPORT)}, got {mode!r}")
    if not math.isfinite(bound) or bound <= 0:
        raise InputError(f"bound must be a positive finite number, got {bound!r}")
    if dtype not in _DTYPES:
        raise InputError(f"dtype must be f32 or f64, got {dtype!r}")
    if nonfinite not in ("refuse", "passthrough"):
        raise InputError(f"nonfinite must be refuse or passthrough, got {nonfinite!r}")
    if codec not in _exportable():
        raise InputError(f"codec {codec!r} cannot be exported: perfscout has numcodecs/Zarr codecs for "
                         f"{', '.join(_exportable())}")
    native = codec_class(codec).native_modes
    if mode != "rel" and mode not in native:
        raise InputError(f"codec {codec!r} has no native mode {mode!r}; native: {', '.join(native)}")
    if mode == "rel" and "abs" not in native:
        raise InputError(f"codec {codec!r} has no abs mode to resolve rel to")
    if value_range is not None and (not math.isfinite(value_range) or value_range <= 0):
        raise InputError(f"value range must be a positive finite number, got {value_range!r}")
    return Setting(codec=codec, mode=mode, bound=float(bound), dtype=_DTYPES[dtype], value_range=value_range,
                   nonfinite=nonfinite)


# -- choosing from stored results -------------------------------------------------------------
def stored_records(run_dir: str | Path) -> tuple[list[dict[str, Any]], str]:
    """Result rows of a sweep or agent run directory, and what kind of directory it is."""
    run_dir = Path(run_dir)
    # an agent run holds the sweep engine's store too (each evaluate_codec task): its answer's
    # records (results.json, each task's final attempt) are what it found
    if (run_dir / "results.sqlite").is_file() and not (run_dir / "results.json").is_file():
        from perfscout.tools.results_store import open_results

        df = open_results(run_dir)
        return json.loads(df.to_json(orient="records")), "sweep"
    if (run_dir / "results.json").is_file():
        try:
            doc = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
            records = list(doc["records"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{run_dir}/results.json is not an agent run's results: {exc}") from exc
        for sweep in sorted(run_dir.glob("sweeps/*/results.sqlite")):  # sweeps the agent ran
            records += stored_records(sweep.parent)[0]
        return records, "agent run"
    raise InputError(f"{run_dir} is neither a sweep directory (results.sqlite) nor an agent run directory "
                     "(results.json); `perfscout runs` lists agent runs, `perfscout sweep` writes sweeps")


def choose_setting(run_dir: str | Path, *, codec: str | None = None, mode: str | None = None,
                   bound: float | None = None, dataset: str | None = None) -> Setting:
    """The best-ratio result whose bound held (among those the filters keep), as a Setting."""
    records, kind = stored_records(run_dir)
    wanted = [r for r in records
              if (codec is None or r.get("codec") == codec) and (mode is None or r.get("mode") == mode)
              and (bound is None or _same(r.get("bound"), bound)) and (dataset is None or r.get("dataset") == dataset)]
    # fixed_rate has no bound to hold (bound_ok is None): only a row asked for by mode is taken.
    held = [r for r in wanted if r.get("status") == "ok" and r.get("ratio") is not None
            and (r.get("bound_ok") in (True, 1) or (mode == "fixed_rate" and r.get("bound_ok") is None))]
    if not held:
        filters = ", ".join(f"{k}={v}" for k, v in (("codec", codec), ("mode", mode), ("bound", bound),
                                                     ("dataset", dataset)) if v is not None) or "none"
        raise InputError(f"no result in {run_dir} ({kind}, {len(records)} rows, {len(wanted)} after filters: "
                         f"{filters}) held its bound; nothing to export. Filters name a row: --codec, --mode, "
                         "--bound, --dataset")
    best = max(held, key=lambda r: float(r["ratio"]))
    return _setting_from_record(best, f"{run_dir} ({kind}, task {best.get('task_key') or '?'})")


def _same(a: Any, b: float) -> bool:
    return a is not None and math.isclose(float(a), float(b), rel_tol=1e-9)


def _setting_from_record(r: dict[str, Any], source: str) -> Setting:
    mode, bound, value_range, notes = r["mode"], float(r["bound"]), None, []
    abs_bound = r.get("abs_bound")
    if mode == "rel":
        if abs_bound is None:
            raise InputError(f"the chosen row ({source}) has no abs_bound to resolve rel with")
        value_range = float(abs_bound) / bound
    elif mode in _SEARCHED:
        if abs_bound is None:
            raise InputError(f"the chosen {mode} row ({source}) has no abs_bound its search settled on")
        notes.append(f"{mode} {bound:g} on {r.get('dataset')} settled on abs {float(abs_bound):.6g}; "
                     "another field needs its own search")
        mode, bound = "abs", float(abs_bound)
    setting = make_setting(r["codec"], mode, bound, dtype=str(r.get("dtype") or "f32"), value_range=value_range)
    return setting.model_copy(update={"source": source, "dataset": str(r.get("dataset") or ""),
                                      "expected_ratio": float(r["ratio"]), "notes": notes})


# -- configurations and snippets ----------------------------------------------------------------
def numcodecs_config(setting: Setting) -> dict[str, Any]:
    """The numcodecs config (``numcodecs.get_codec(config)`` builds the codec)."""
    from perfscout.codecs.numcodecs import numcodecs_codec

    if setting.mode == "rel" and setting.value_range is None:
        raise InputError("mode rel needs the field's value range to become an absolute bound: give "
                         "--value-range R, or --check DATA to take it from the data")
    extra = {"value_range": setting.value_range} if setting.mode == "rel" else {}
    codec = numcodecs_codec(setting.codec, setting.mode, setting.bound, nonfinite=setting.nonfinite, **extra)
    return codec.get_config()


def hdf5_filter(setting: Setting) -> tuple[str, dict[str, float]] | None:
    """(hdf5plugin class, keyword arguments) for h5py, or None when no HDF5 filter exists."""
    eb = setting.abs_bound
    table: dict[tuple[str, str], tuple[str, str]] = {
        ("sz3", "abs"): ("SZ3", "absolute"), ("sz3-h5", "abs"): ("SZ3", "absolute"),
        ("sz2", "abs"): ("SZ", "absolute"), ("sz2", "pw_rel"): ("SZ", "pointwise_relative"),
        ("zfp", "abs"): ("Zfp", "accuracy"), ("zfp", "fixed_rate"): ("Zfp", "rate"),
    }
    mode = "abs" if setting.mode == "rel" else setting.mode
    entry = table.get((setting.codec, mode))
    if entry is None:
        return None
    if mode == "abs" and eb is None:
        raise InputError("mode rel needs the field's value range for an HDF5 filter's absolute bound: give "
                         "--value-range R or --check DATA")
    return entry[0], {entry[1]: float(eb if mode == "abs" else setting.bound)}  # type: ignore[arg-type]


def configs(setting: Setting) -> dict[str, Any]:
    """Each target's configuration as JSON-able data (what a file or store will record)."""
    nc = numcodecs_config(setting)
    zarr_codec = {"name": f"numcodecs.{nc['id']}", "configuration": {k: v for k, v in nc.items() if k != "id"}}
    out: dict[str, Any] = {
        "numcodecs": nc,
        "zarr": {"codecs": [zarr_codec]},  # the array's whole pipeline in zarr.json: the serializer alone
        "xarray": {"each_float_variable": {"serializer": zarr_codec, "compressors": None}},
    }
    h5 = hdf5_filter(setting)
    if h5 is not None:
        import hdf5plugin

        filt = getattr(hdf5plugin, h5[0])(**h5[1])
        out["hdf5"] = {"hdf5plugin": h5[0], "kwargs": h5[1], "compression": int(filt.filter_id),
                       "compression_opts": [int(v) for v in filt.filter_options]}
    return out


def snippets(codec: str, mode: str, bound: float, *, dtype: str, value_range: float | None = None,
             nonfinite: str = "refuse") -> dict[str, str]:
    """Paste-ready Python for each target (``data`` is the user's array). For ``rel`` without
    a known value range the snippet computes it from ``data``, as perfscout did."""
    s = make_setting(codec, mode, bound, dtype=dtype, value_range=value_range, nonfinite=nonfinite)
    return setting_snippets(s)


def setting_snippets(s: Setting) -> dict[str, str]:
    """:func:`snippets` for a :class:`Setting` (``hdf5`` only where an HDF5 filter runs it)."""
    from perfscout.codecs.numcodecs import BY_BACKEND
    from perfscout.codecs.numcodecs.zarr3 import BY_BACKEND as ZARR_BY_BACKEND

    zarr_cls = ZARR_BY_BACKEND[s.codec].__name__
    pre, args = "", f"mode={s.mode!r}, bound={s.bound!r}"
    if s.mode == "rel":
        if s.value_range is None:
            pre = ("import numpy as np\n"
                   "value_range = float(np.nanmax(data) - np.nanmin(data))  # R of the whole field\n")
            args += ", value_range=value_range"
        else:
            args += f", value_range={s.value_range!r}"
    if s.nonfinite != "refuse":
        args += f", nonfinite={s.nonfinite!r}"
    out = {
        "numcodecs": (f"import numcodecs\n{pre}codec = numcodecs.get_codec(dict(id={BY_BACKEND[s.codec].codec_id!r}, "
                      f"{args}))\nblob = codec.encode(data)  # bytes, self-describing\nback = codec.decode(blob)\n"),
        "zarr": (f"import zarr\nfrom perfscout.codecs.numcodecs.zarr3 import {zarr_cls}\n{pre}"
                 f"z = zarr.create_array(\"field.zarr\", shape=data.shape, chunks=data.shape, dtype=data.dtype,\n"
                 f"                      serializer={zarr_cls}({args}), compressors=None)\n"
                 "z[:] = data\n"),
        "xarray": (f"from perfscout.codecs.numcodecs.zarr3 import {zarr_cls}\n"  # rel: each variable's own R
                   f"encoding = {{name: {{\"serializer\": {zarr_cls}("
                   f"{args.replace('value_range=value_range', 'value_range=float(var.max() - var.min())')}), "
                   "\"compressors\": None}\n"
                   "            for name, var in ds.data_vars.items() if var.dtype.kind == \"f\"}\n"
                   "ds.to_zarr(\"dataset.zarr\", mode=\"w\", zarr_format=3, encoding=encoding)\n"),
    }
    h5 = _hdf5_snippet(s, pre)
    if h5:
        out["hdf5"] = h5
    return out


def _hdf5_snippet(s: Setting, pre: str) -> str:
    mode = "abs" if s.mode == "rel" else s.mode
    if s.mode == "rel" and s.value_range is None:
        probe = s.model_copy(update={"value_range": 1.0})  # only to name the filter and keyword
        h5 = hdf5_filter(probe)
        if h5 is None:
            return ""
        value = f"{s.bound!r} * value_range"
    else:
        h5 = hdf5_filter(s)
        if h5 is None:
            return ""
        value = repr(next(iter(h5[1].values())))
    key = next(iter(h5[1]))
    note = "  # SZ3's HDF5 filter (same algorithm, its own bytes)" if s.codec == "sz3" else ""
    return (f"import h5py, hdf5plugin\n{pre if mode == 'abs' and s.mode == 'rel' else ''}"
            f"with h5py.File(\"field.h5\", \"w\") as f:\n"
            f"    f.create_dataset(\"field\", data=data, chunks=data.shape,\n"
            f"                     **hdf5plugin.{h5[0]}({key}={value})){note}\n")


# -- checking with each target's own library ---------------------------------------------------------
class TargetCheck(BaseModel):
    """What one target's write + read-back measured."""

    target: str
    status: str  # ok | bound_violated | bound_overshoot | not_applicable | error
    path: str = ""
    stored_bytes: int | None = None  # chunk/dataset payload
    total_bytes: int | None = None  # the whole file or store, metadata included
    ratio: float | None = None  # raw bytes / stored_bytes
    ratio_vs_expected: float | None = None
    max_abs_err: float | None = None
    abs_bound: float | None = None
    bound_ok: bool | None = None
    message: str = ""


def resolve_for_data(setting: Setting, data: np.ndarray) -> Setting:
    """The setting with ``rel`` taken relative to ``data``'s own value range (the rule of
    perfscout.tools.bounds: R = max - min of the finite values; constant fields by |value|)."""
    if setting.mode != "rel":
        return setting
    from perfscout.tools.bounds import rel_reference

    reference, note = rel_reference(data)
    notes = list(setting.notes) + ([note] if note else [])
    if setting.value_range is not None and not math.isclose(setting.value_range, reference, rel_tol=1e-9):
        notes.append(f"rel {setting.bound:g} taken relative to this data's range {reference:.6g} "
                     f"(the evaluated field's was {setting.value_range:.6g})")
    return setting.model_copy(update={"value_range": reference, "notes": notes})


def check(setting: Setting, data: np.ndarray, directory: str | Path, *, targets: tuple[str, ...] = TARGETS,
          chunks: tuple[int, ...] | None = None) -> list[TargetCheck]:
    """Write ``data`` with each target's library under ``directory``, read it back, verify."""
    data = np.ascontiguousarray(data)
    if data.dtype.name not in ("float32", "float64"):
        raise InputError(f"--check data must be float32 or float64, got {data.dtype}")
    setting = resolve_for_data(setting, data)
    if chunks is not None and len(chunks) != data.ndim:
        raise InputError(f"--chunks has {len(chunks)} axes, the data {data.ndim}")
    if chunks is not None and any(c > n for c, n in zip(chunks, data.shape)):
        raise InputError(f"--chunks {tuple(chunks)} is larger than the data {data.shape} on some axis")
    chunks = tuple(chunks or _default_chunks(data))
    directory = Path(directory)
    _check_folder_is_ours(directory)
    directory.mkdir(parents=True, exist_ok=True)
    finite = np.isfinite(data)
    if not finite.all() and setting.nonfinite == "refuse":
        raise InputError(f"the check data holds {int((~finite).sum())} non-finite value(s); export with "
                         "--nonfinite passthrough to store them exactly")
    results = []
    for target in targets:
        try:
            written = _WRITERS[target](setting, data, directory, chunks)
        except Exception as exc:  # noqa: BLE001 - a target's library failing is a finding, not a crash
            # The numcodecs codecs refuse a chunk whose bound breaks: that is the verdict, not an error.
            status = "bound_violated" if "bound_violated" in str(exc) else "error"
            results.append(TargetCheck(target=target, status=status, bound_ok=False if status != "error" else None,
                                       message=f"{type(exc).__name__}: {exc}"))
            continue
        if written is None:
            results.append(TargetCheck(target=target, status="not_applicable",
                                       message=f"no {target} path for {setting.codec} {setting.mode}"))
            continue
        back, path, stored, total = written
        results.append(_verdict(target, setting, data, finite, back, path, stored, total))
    return results


def _default_chunks(data: np.ndarray) -> tuple[int, ...]:
    """The whole array up to 16 MiB a chunk (the ratio then matches perfscout's evaluation);
    larger arrays are split along the slowest axis."""
    limit = 16 * 2**20
    if data.nbytes <= limit:
        return data.shape
    plane = data.nbytes // data.shape[0]
    return (max(1, limit // plane), *data.shape[1:])


def _verdict(target: str, s: Setting, data: np.ndarray, finite: np.ndarray, back: np.ndarray, path: Path,
             stored: int, total: int) -> TargetCheck:
    from perfscout.tools.bounds import verify_bound

    if back.shape != data.shape or back.dtype != data.dtype:
        return TargetCheck(target=target, status="error", path=str(path),
                           message=f"read back {back.dtype} {back.shape}, wrote {data.dtype} {data.shape}")
    if not np.array_equal(np.isfinite(back), finite):
        return TargetCheck(target=target, status="bound_violated", path=str(path),
                           message="non-finite values were not restored where they were")
    abs_b = s.abs_bound if s.mode in ("abs", "rel") else None
    pw = s.bound if s.mode == "pw_rel" else None
    vb = verify_bound(data[finite], back[finite], abs_bound=abs_b, pw_rel_bound=pw)
    ratio = data.nbytes / stored if stored else None
    status = vb.status
    message = vb.message
    if ratio is not None and ratio <= 1.0 and status == "ok":
        status, message = "error", f"stored {stored} bytes for {data.nbytes} raw: no compression"
    return TargetCheck(
        target=target, status=status, path=str(path), stored_bytes=stored, total_bytes=total, ratio=ratio,
        ratio_vs_expected=ratio / s.expected_ratio if ratio and s.expected_ratio else None,
        max_abs_err=vb.max_abs_err, abs_bound=abs_b, bound_ok=vb.bound_ok, message=message,
    )


def _tree_bytes(path: Path, *, skip_metadata: bool) -> int:
    files = [p for p in path.rglob("*") if p.is_file()]
    if skip_metadata:
        files = [p for p in files if p.name not in ("zarr.json", ".zattrs", ".zarray", ".zgroup", ".zmetadata")]
    return sum(p.stat().st_size for p in files)


#: What :func:`check` writes in its folder (each target's sample); nothing else is touched.
CHECK_FILES = frozenset({"sample.pscz", "sample.zarr", "sample-xarray.zarr", "sample.h5"})


def _check_folder_is_ours(directory: Path) -> None:
    """InputError unless ``directory`` is new, empty or holds only an earlier check's samples:
    the targets write (zarr and xarray in mode "w": replacing) the names in CHECK_FILES."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise InputError(f"cannot keep the check files in {directory}: it is a file, not a directory")
    foreign = sorted(set(os.listdir(directory)) - CHECK_FILES)
    if foreign:
        raise InputError(f"{directory} holds files that are not export's samples ({', '.join(foreign[:5])}"
                         f"{', ...' if len(foreign) > 5 else ''}); the check writes {', '.join(sorted(CHECK_FILES))} "
                         "there: choose a new or empty folder")


def _write_numcodecs(s: Setting, data: np.ndarray, d: Path, chunks: tuple[int, ...]) -> Any:
    import numcodecs

    codec = numcodecs.get_codec(numcodecs_config(s))
    blob = codec.encode(data)
    path = d / "sample.pscz"
    path.write_bytes(blob)
    back = numcodecs.get_codec(numcodecs_config(s)).decode(path.read_bytes())
    return back, path, len(blob), len(blob)


def _write_zarr(s: Setting, data: np.ndarray, d: Path, chunks: tuple[int, ...]) -> Any:
    import zarr

    from perfscout.codecs.numcodecs.zarr3 import BY_BACKEND

    cfg = {k: v for k, v in numcodecs_config(s).items() if k != "id"}
    path = d / "sample.zarr"
    arr = zarr.create_array(path, shape=data.shape, chunks=chunks, dtype=data.dtype,
                            serializer=BY_BACKEND[s.codec](**cfg), compressors=None, overwrite=True)
    arr[:] = data
    back = zarr.open_array(path, mode="r")[:]
    return back, path, _tree_bytes(path, skip_metadata=True), _tree_bytes(path, skip_metadata=False)


def _write_xarray(s: Setting, data: np.ndarray, d: Path, chunks: tuple[int, ...]) -> Any:
    import xarray as xr

    from perfscout.codecs.numcodecs.zarr3 import BY_BACKEND

    cfg = {k: v for k, v in numcodecs_config(s).items() if k != "id"}
    dims = tuple(f"dim_{i}" for i in range(data.ndim))
    path = d / "sample-xarray.zarr"
    xr.Dataset({"field": (dims, data)}).to_zarr(
        path, mode="w", zarr_format=3, consolidated=False,
        encoding={"field": {"serializer": BY_BACKEND[s.codec](**cfg), "compressors": None, "chunks": chunks}})
    with xr.open_zarr(path, consolidated=False) as ds:
        back = ds["field"].values
    stored = _tree_bytes(path / "field", skip_metadata=True)
    return back, path, stored, _tree_bytes(path, skip_metadata=False)


def _write_hdf5(s: Setting, data: np.ndarray, d: Path, chunks: tuple[int, ...]) -> Any:
    h5 = hdf5_filter(s)
    if h5 is None:
        return None
    if not np.isfinite(data).all():
        raise InputError("the HDF5 SZ/ZFP filters cannot store NaN/Inf; mask them before writing HDF5")
    import h5py
    import hdf5plugin

    path = d / "sample.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("field", data=data, chunks=chunks, **getattr(hdf5plugin, h5[0])(**h5[1]))
    with h5py.File(path, "r") as f:
        ds = f["field"]
        back, stored = ds[()], int(ds.id.get_storage_size())
    return back, path, stored, path.stat().st_size


_WRITERS = {"numcodecs": _write_numcodecs, "zarr": _write_zarr, "xarray": _write_xarray, "hdf5": _write_hdf5}


# -- the agent's report ------------------------------------------------------------------------------
def use_it_blocks(records: list[dict[str, Any]], *, targets: tuple[str, ...] = ("numcodecs", "zarr", "xarray", "hdf5"),
                  source: str = "this run", level: int = 2) -> list[Any]:
    """A "Use it" section (report blocks) for the best-ratio record whose bound held ([] if
    none): the setting in words and each target's snippet, ready to end a report."""
    from perfscout.analysis.report.blocks import BulletList, Code, CodeBlock, Heading, Paragraph, Strong

    held = [r for r in records if r.get("status") == "ok" and r.get("bound_ok") in (True, 1)
            and r.get("ratio") is not None and r.get("codec") in _exportable()]
    if not held:
        return []
    best = max(held, key=lambda r: float(r["ratio"]))
    try:
        setting = _setting_from_record(best, source)
    except InputError:
        return []
    snips = setting_snippets(setting)
    blocks: list[Any] = [
        Heading("Use it", level),
        Paragraph(["Best verified setting: ", Strong(f"{setting.codec} {best['mode']} {float(best['bound']):g}"),
                   f" on {best.get('dataset', '?')} (ratio {float(best['ratio']):.3g}, bound held). ",
                   Code("perfscout export"), " prints these for any row, and ", Code("--check DATA"),
                   " re-verifies them on your data."]),
    ]
    if setting.notes:
        blocks.append(BulletList(list(setting.notes)))
    for target in targets:
        if target in snips:
            blocks += [Paragraph(f"{target}:"), CodeBlock(snips[target], "python")]
    return blocks


def use_it_markdown(records: list[dict[str, Any]], *, targets: tuple[str, ...] = ("numcodecs", "zarr", "xarray", "hdf5"),
                    source: str = "this run") -> str:
    """:func:`use_it_blocks` as a Markdown section ("" if there is no setting to recommend)."""
    from perfscout.analysis.report.markdown import render_blocks

    blocks = use_it_blocks(records, targets=targets, source=source)
    return render_blocks(blocks) if blocks else ""


def _exportable() -> tuple[str, ...]:
    from perfscout.codecs.numcodecs import BY_BACKEND

    return tuple(BY_BACKEND)
