"""The demo job: every installed CPU codec on one real field at REL 1e-2, 1e-3, 1e-4.

The field is ``vorticity.512_512`` from ``../shared/data`` (through the datasets
registry) when it is there; otherwise a deterministic synthetic Gaussian random field
of the same shape, and the demo says so. Every result is verified like any other
evaluation; the table shows ratio, PSNR, worst error, the bound verdict and speed.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.table import Table

from perfscout.codecs.registry import list_codecs
from perfscout.errors import PerfscoutError
from perfscout.state.records import CompressionResult

DEMO_DATASET = "vorticity.512_512"
DEMO_BOUNDS = (1e-2, 1e-3, 1e-4)
DEMO_SYNTHETIC = ("grf", (512, 512))


def demo_field() -> tuple[object, str]:
    """(Field, a sentence saying where it came from)."""
    from perfscout.datasets import get_dataset, synthetic

    try:
        field = get_dataset(DEMO_DATASET)
        return field, f"real field {DEMO_DATASET} ({getattr(field, 'source', '')})"
    except (PerfscoutError, OSError) as exc:
        kind, shape = DEMO_SYNTHETIC
        field = synthetic(kind, shape, dtype="f32", seed=0)
        return field, (
            f"synthetic {kind} field {'x'.join(map(str, shape))} f32, seed 0 "
            f"({DEMO_DATASET} not available: {exc})"
        )


def demo_codecs() -> list[str]:
    return [c.id for c in list_codecs() if c.available and c.device == "cpu"]


def run_demo(
    bounds: Iterable[float] = DEMO_BOUNDS,
    codecs: Iterable[str] | None = None,
    repeats: int = 3,
    field: object | None = None,
    run_id: str = "demo",
) -> list[CompressionResult]:
    """Evaluate each codec at each REL bound; one verified record per pair."""
    from perfscout.tools.evaluate import evaluate

    if field is None:
        field, _ = demo_field()
    results = []
    for codec in codecs if codecs is not None else demo_codecs():
        for bound in bounds:
            results.append(
                evaluate(field, codec, "rel", bound, repeats=repeats, run_id=run_id,
                         task_key=f"{codec}/rel/{bound:g}")
            )
    return results


def demo_table(results: list[CompressionResult], title: str = "") -> Table:
    """The demo's table; columns never wrap (print it with enough width)."""
    table = Table(title=title or None, box=box.SIMPLE_HEAD)
    for name, justify in (("codec", "left"), ("mode", "left"), ("bound", "right"), ("ratio", "right"),
                          ("PSNR dB", "right"), ("max err", "right"), ("bound_ok", "left"),
                          ("comp MB/s", "right"), ("decomp MB/s", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]

    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    for r in results:
        verdict = str(r.bound_ok) if r.status == "ok" else r.status
        if r.status in ("bound_violated", "bound_overshoot"):
            verdict = f"False ({r.status})"
        table.add_row(
            r.codec, r.mode, f"{r.bound:g}", num(r.ratio, ".2f"), num(r.psnr, ".1f"),
            num(r.max_abs_err, ".3g"), verdict, num(r.compress_MBps, ".0f"), num(r.decompress_MBps, ".0f"),
        )
    return table
