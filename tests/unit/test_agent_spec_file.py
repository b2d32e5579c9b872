"""agent.run(Path(...)) reads a spec file through the one reader of named files: what is not
a regular, readable, reasonably sized UTF-8 file is an InputError before anything runs
(a FIFO would block forever, /dev/zero would fill memory)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfscout.agent import load_request
from perfscout.errors import InputError


def test_spec_paths_that_are_not_spec_files_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    (tmp_path / "adir").mkdir()
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00name: x")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    for path, message in [(fifo, "spec"), (tmp_path / "adir", "spec"), (Path("/dev/zero"), "spec"),
                          (tmp_path / "missing.yaml", "spec"), (tmp_path / "bin.yaml", "not UTF-8"),
                          (tmp_path / "list.yaml", "must be a YAML mapping")]:
        with pytest.raises(InputError, match=message):
            load_request(path)


def test_a_spec_file_is_read(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("goal: compare\ncodecs: [sz3]\nmode: rel\nbounds: [1.0e-3]\ndataset: field.npy\n")
    doc = load_request(spec)
    # relative to the spec's folder, as `perfscout sweep FILE` reads it
    assert doc["codecs"] == ["sz3"] and doc["dataset"] == str(tmp_path / "field.npy")


def test_a_spec_file_is_validated_by_the_sweep_schema_with_line_numbers(tmp_path: Path) -> None:
    """`run --spec` and `sweep` read one schema: a bad key or value names its line in both."""
    from perfscout.sweep.spec import SpecError, load_spec

    spec = tmp_path / "s.yaml"
    spec.write_text("goal: compare\ncodecs: [sz3]\nmode: relative\nbounds: [1.0e-3]\ndata: [vorticity.512_512]\n")
    with pytest.raises(SpecError) as exc:
        load_request(spec)
    assert f"{spec}:3: modes.0: unknown mode 'relative'" in str(exc.value)
    assert f"{spec}:5: data: Extra inputs are not permitted" in str(exc.value)
    # the same file as a sweep: the same errors, and the agent's own key refused by its line
    with pytest.raises(SpecError) as sweep_exc:
        load_spec(spec)
    assert f"{spec}:1: goal: read by `perfscout run --spec`" in str(sweep_exc.value)
    spec.write_text("codecs: [sz3]\nmode: relative\nbounds: [1.0e-3]\ndatasets: [vorticity.512_512]\n")
    with pytest.raises(SpecError, match=rf"{spec}:2: modes.0: unknown mode 'relative'"):
        load_spec(spec)
    with pytest.raises(SpecError, match=rf"{spec}:2: modes.0: unknown mode 'relative'"):
        load_request(spec)
