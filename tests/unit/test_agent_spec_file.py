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
    spec.write_text("question: compare\ncodecs: [sz3]\nmode: rel\nbounds: [1.0e-3]\ndata: [vorticity.512_512]\n")
    assert load_request(spec)["codecs"] == ["sz3"]
