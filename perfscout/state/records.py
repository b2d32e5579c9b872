"""Typed records shared by the graph, the tools and the stores.

The column set of :class:`CompressionResult` and the JSON shape of :class:`Finding`
are contracts (see DESIGN.md): scripts and stored results depend on them, so add
fields only with care and never rename one.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: Status of one compression evaluation. ``ok`` means it ran and was verified;
#: a violated bound is still ``ok`` as a *run* (bound_ok=False carries the verdict).
ResultStatus = Literal[
    "ok",
    "bound_violated",
    "bound_overshoot",
    "nonfinite_input",
    "gpu_unavailable",
    "gpu_out_of_memory",
    "codec_crashed",
    "codec_timeout",
    "error",
]

#: Stable record columns, in order (DESIGN.md "Compression result record").
RESULT_COLUMNS: tuple[str, ...] = (
    "run_id", "task_key", "dataset", "shape", "dtype", "nbytes", "codec", "codec_version",
    "device", "device_name", "mode", "bound", "abs_bound", "repeats", "compress_s",
    "decompress_s", "compress_MBps", "decompress_MBps", "h2d_s", "d2h_s", "ratio", "bitrate", "chunks",
    "max_abs_err", "max_rel_err", "max_pw_rel_err", "rmse", "nrmse", "psnr", "snr", "pearson",
    "ssim", "err_autocorr_lag1", "bound_ok", "status", "error", "started_at", "platform_id",
)


class CompressionResult(BaseModel):
    """One row per (dataset, codec, device, mode, bound) evaluation.

    Times are medians over ``repeats``, after one untimed warm-up when ``repeats`` > 1
    (with one repeat the single run is the timed one, and the notes say the timing is
    cold). ``bound`` is what the user
    asked for in ``mode``; ``abs_bound`` the absolute bound it resolved to (for
    ``psnr``/``ratio`` modes, the bound the search settled on). ``max_rel_err`` is
    R-relative (R = max - min), ``max_pw_rel_err`` point-wise relative.
    """

    model_config = ConfigDict(extra="forbid")

    run_id: str = ""
    task_key: str = ""
    dataset: str
    shape: str  # "Z,Y,X" (C order, slowest first)
    dtype: str  # "f32" | "f64"
    nbytes: int
    codec: str
    codec_version: str = ""
    device: str = "cpu"
    device_name: str = ""
    mode: str
    bound: float
    abs_bound: float | None = None
    repeats: int = 1
    compress_s: float | None = None
    decompress_s: float | None = None
    compress_MBps: float | None = None
    decompress_MBps: float | None = None
    h2d_s: float | None = None
    d2h_s: float | None = None
    ratio: float | None = None
    bitrate: float | None = None
    #: Independent streams the codec split the array into (its ``threads`` option: slabs along
    #: the slowest axis, each compressed on its own; the ratio includes every stream's header).
    #: 1: one stream; None: not recorded (a record from before the column, or no stream).
    chunks: int | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    max_pw_rel_err: float | None = None
    rmse: float | None = None
    nrmse: float | None = None
    psnr: float | None = None
    snr: float | None = None
    pearson: float | None = None
    ssim: float | None = None
    err_autocorr_lag1: float | None = None
    bound_ok: bool | None = None
    status: ResultStatus = "ok"
    error: str = ""
    started_at: str = ""
    platform_id: str = ""

    def row(self) -> dict[str, Any]:
        """The record as a flat dict in the stable column order."""
        data = self.model_dump()
        return {c: data[c] for c in RESULT_COLUMNS}


class Evidence(BaseModel):
    """One measured fact a finding rests on.

    ``metric`` is the name exactly as it appears in the input profile header, or
    ``derived:NAME`` for a value computed from several metrics (``inputs`` then lists
    them, and each must itself be present in the profile).
    """

    metric: str
    value: float | str | None
    unit: str = ""
    threshold: str = ""
    inputs: list[str] = Field(default_factory=list)


class Finding(BaseModel):
    """An evidence-backed statement about a kernel, a program or a compression run.

    ``id`` comes from the stable taxonomy in DESIGN.md.
    """

    id: str
    title: str
    confidence: float = Field(ge=0.0, le=1.0, default=0.5)
    evidence: list[Evidence] = Field(default_factory=list)
    recommendation: str = ""
    verify: str = ""
    not_when: str = ""
    expected_gain: float | None = None  # fraction of runtime that could be saved, bounded by headroom
    arch: str = ""  # the architecture assumption, e.g. "sm_80+" or "any"
    extra: dict[str, Any] = Field(default_factory=dict)
