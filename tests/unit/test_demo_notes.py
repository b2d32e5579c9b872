"""`perfscout demo`'s notes: sentences a person reads, not raw note objects."""

from __future__ import annotations

from perfscout.tools.demo import note_lines


def _noisy(task: str, spreads: list[int]) -> list[dict]:
    notes = [{"task_key": task, "kind": "timing_noisy", "message": f"timing spread {s}% > 25%; repeating"}
             for s in spreads[:-1]]
    return notes + [{"task_key": task, "kind": "timing_noisy",
                     "message": f"timing spread {spreads[-1]}% even at the cap of 15 repeats"}]


def test_many_tasks_of_one_kind_are_one_line_pointing_at_the_report() -> None:
    notes = [n for i in range(1, 13) for n in _noisy(f"t{i:02d}-sz3", [120, 60, 69, 40 + i])]
    lines = note_lines(["dataset vorticity.512_512 found: using the real field"], notes, tasks=12)
    assert lines[0] == "dataset vorticity.512_512 found: using the real field"
    assert lines[1:] == ["timing noisy on 12 of 12 tasks, t01-sz3 to t12-sz3 (48 notes, all in the report); "
                         "the last, on t12-sz3: timing spread 52% even at the cap of 15 repeats"]
    assert not any("{" in line or "'kind'" in line for line in lines)


def test_a_few_tasks_keep_a_line_each_with_their_last_word() -> None:
    notes = _noisy("t01-zfp", [30, 31]) + [
        {"task_key": "t04-sz2", "kind": "gpu_unavailable", "message": "no CUDA device:\n ran on the CPU"},
        {"kind": "budget", "message": "stopped after 40 steps"}]
    assert note_lines([], notes) == [
        "t01-zfp: timing spread 31% even at the cap of 15 repeats (timing noisy, 2 notes)",
        "t04-sz2: no CUDA device: ran on the CPU (gpu unavailable)",
        "stopped after 40 steps (budget)"]
