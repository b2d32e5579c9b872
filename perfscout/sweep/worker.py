"""The child process of a sweep: run one task, write its record, exit.

``python -m perfscout.sweep.worker TASK.json RESULT.json``. It sets its own memory
limit first (so a runaway codec fails here, not in the parent), loads the data, calls
:func:`perfscout.tools.evaluate.evaluate` and writes the record atomically. If the codec
kills the process (segfault, abort) or hangs, RESULT.json never appears and the parent
records ``codec_crashed`` / ``codec_timeout`` from the outside.
"""

from __future__ import annotations

import json
import signal
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

from perfscout.io import write_atomic, write_json_atomic
from perfscout.tools.process_limits import die_with_parent, limit_memory


def load_array(task: object):  # -> np.ndarray | datasets.Field
    """The task's data, read by :func:`perfscout.datasets.open` (as ``eval`` and the agent read it)."""
    from perfscout import datasets

    ref = task.data.ref  # type: ignore[attr-defined]
    if ref.masked == "refuse":  # no fill value given: the nonfinite policy says (as in eval)
        ref = ref.model_copy(update={"masked": datasets.masked_policy(None, task.nonfinite)})  # type: ignore[attr-defined]
    return datasets.open(ref)


def search_path(result_path: Path) -> Path:
    """Where a task's psnr/ratio search outcome goes, beside its record: ``result.TAG.json``
    -> ``search.TAG.json`` (promoted with it to ``search.json``)."""
    name = result_path.name
    return result_path.with_name("search" + name[len("result"):] if name.startswith("result")
                                 else f"{result_path.stem}.search.json")


def evaluation_path(result_path: Path) -> Path:
    """Where a task's timing spread and notes go, beside its record: ``result.TAG.json`` ->
    ``evaluation.TAG.json`` (made canonical with it by the runner)."""
    name = result_path.name
    return result_path.with_name("evaluation" + name[len("result"):] if name.startswith("result")
                                 else f"{result_path.stem}.evaluation.json")


def timing_doc(stats: Any) -> dict[str, Any] | None:
    """The spread of the timed repeats (None when the codec timed itself): what the agent's
    reflect reads (cv, noisy) and the Answer's per-repeat claims cite (samples_s)."""
    if stats is None:
        return None
    return {"cv": float(stats.cv), "noisy": bool(stats.noisy), "too_small": bool(stats.too_small),
            "repeats": int(stats.repeats), "samples_s": [float(x) for x in stats.samples_s]}


def run_task(task_path: Path, result_path: Path, *, base_bytes: int = 0,
             load: Callable[[Any], Any] | None = None) -> int:
    """Run one task and write its record. ``base_bytes``: the address space this process had
    before the task (a child forked from the task server, :mod:`.forkserver`): the memory
    limit is on what the task adds to it. ``load``: how to get the task's data (default
    :func:`load_array`; the GPU worker keeps the last field for the next task on it)."""
    from perfscout.sweep.spec import SweepTask, import_plugins

    task = SweepTask.model_validate_json(task_path.read_text())
    meta = json.loads(task_path.with_name("run.json").read_text()) if task_path.with_name("run.json").is_file() else {}
    limit_memory(task.memory_limit_mb, task.device.split(":")[0], base_bytes=base_bytes)
    import_plugins(task.plugins, task.base_dir)
    if task.registered:  # registered at run time in the process that made the task
        from perfscout.codecs.registry import register_codec

        for codec_id, import_path in task.registered.items():
            register_codec(codec_id, import_path)

    from perfscout.errors import CodecUnavailable, InputError, PerfscoutError
    from perfscout.state.records import CompressionResult
    from perfscout.tools.evaluate import evaluate_full

    base = dict(
        run_id=meta.get("run_id", ""), task_key=task.task_key, dataset=task.data.label, shape=task.data.shape_str,
        dtype=task.data.dtype, nbytes=task.data.nbytes, codec=task.codec, device=task.device, mode=task.mode,
        bound=task.bound, repeats=task.repeats, platform_id=meta.get("platform_id", ""),
    )
    evaluation: dict[str, Any] = {"timing": None, "notes": []}
    try:
        data = (load or load_array)(task)
        evaluation["notes"] = list(getattr(data, "notes", []) or [])
        ev = evaluate_full(
            data, task.codec, task.mode, task.bound, device=task.device.split(":")[0], repeats=task.repeats,
            dataset=task.data.label, nonfinite=task.nonfinite, options=task.options, run_id=base["run_id"],
            task_key=task.task_key, platform_id=base["platform_id"],
            isolate=False,  # this process is the isolation: its parent records a crash
        )
        record = ev.result
        evaluation["timing"] = {name: timing_doc(getattr(ev, f"{name}_timing", None))
                                for name in ("compress", "decompress")}
        evaluation["notes"] = list(ev.notes)
        if "search" in ev.extra:  # the record has no column for a psnr/ratio search's trials
            write_json_atomic(search_path(result_path), ev.extra["search"])
        if record.device == task.device.split(":")[0]:  # a codec that fell back to the CPU says "cpu"
            record.device = task.device  # keep "cuda:1": CUDA_VISIBLE_DEVICES made it "cuda" in here
        if "MemoryError" in record.error and task.device == "cpu":
            record.error += f" (the task's address space is limited to {task.memory_limit_mb} MiB)"
    except MemoryError:
        traceback.print_exc()
        record = CompressionResult(**base, status="error",
                                   error=f"MemoryError: the task exceeded its memory limit of {task.memory_limit_mb} MiB")
    except PerfscoutError as exc:
        refused_nonfinite = type(exc).__name__ in ("NonfiniteInputError", "MaskedValuesError")
        status = "nonfinite_input" if refused_nonfinite else "error"
        record = CompressionResult(**base, status=status, error=str(exc))
        # what the agent needs to ask which policy the user wants (the counts it names)
        evaluation["refused"] = _refusal(exc, "input" if isinstance(exc, (InputError, CodecUnavailable)) else "perfscout")
    except Exception as exc:  # noqa: BLE001 - any failure of one task is that task's record
        traceback.print_exc()
        record = CompressionResult(**base, status="error", error=f"{type(exc).__name__}: {exc}")
        evaluation["refused"] = _refusal(exc, "other")
    write_json_atomic(evaluation_path(result_path), evaluation)  # before the record: the parent reads both
    write_atomic(result_path, record.model_dump_json(indent=1))  # the parent only ever sees a whole record
    return 0


def _refusal(exc: BaseException, kind: str) -> dict[str, Any]:
    """Why the evaluation raised instead of measuring, for a caller that answers in other
    terms than a record (the agent asks for a NaN/Inf policy with the counts, refuses bad
    input, retries a transient failure): ``kind`` is input | perfscout | other."""
    transient = isinstance(exc, (TimeoutError, ConnectionError, BlockingIOError, InterruptedError))
    return {"type": type(exc).__name__, "message": str(exc), "kind": kind, "transient": transient,
            **{k: getattr(exc, k) for k in ("count", "total") if isinstance(getattr(exc, k, None), int)}}


def main() -> int:
    # The parent owns Ctrl-C: it stops children itself, in order.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    if len(sys.argv) != 3:
        print("usage: python -m perfscout.sweep.worker TASK.json RESULT.json", file=sys.stderr)
        return 2
    return run_task(Path(sys.argv[1]), Path(sys.argv[2]))


if __name__ == "__main__":
    sys.exit(main())
