"""The demo job: every installed CPU codec on one real field at REL 1e-2, 1e-3, 1e-4.

The field is ``vorticity.512_512`` from ``../shared/data`` (through the datasets
registry) when it is there; otherwise a deterministic synthetic Gaussian random field
of the same shape, and the demo says so. Every result is verified like any other
evaluation; the table shows ratio, PSNR, worst error, the bound verdict and speed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

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


def note_lines(plan_notes: Iterable[str], run_notes: Iterable[Mapping[str, Any]], *, tasks: int | None = None,
               per_kind: int = 3) -> list[str]:
    """The run's notes as lines a person reads: planning notes as written; what reflect
    decided grouped by kind, one line per task when few tasks share the kind (its last note,
    and how many it had), one line for the kind when many do (a noisy machine makes every
    evaluation repeat: 4 notes on each of 12 tasks), pointing at the report for the rest."""
    lines = [" ".join(str(n).split()) for n in plan_notes]
    by_kind: dict[str, dict[str, list[str]]] = {}
    for n in run_notes:
        task = str(n.get("task_key") or "")
        by_kind.setdefault(str(n.get("kind") or "note"), {}).setdefault(task, []).append(
            " ".join(str(n.get("message", "")).split()))
    for kind, per_task in by_kind.items():
        words = kind.replace("_", " ")
        if len(per_task) <= per_kind:
            for task, messages in per_task.items():
                count = f", {len(messages)} notes" if len(messages) > 1 else ""
                lines.append(f"{task + ': ' if task else ''}{messages[-1]} ({words}{count})")
            continue
        names = list(per_task)
        total = sum(len(m) for m in per_task.values())
        of = f" of {tasks}" if tasks else ""
        lines.append(f"{words} on {len(names)}{of} tasks, {names[0]} to {names[-1]} ({total} notes, all in the "
                     f"report); the last, on {names[-1]}: {per_task[names[-1]][-1]}")
    return lines
