"""perfscout.io's readers: a named file checked before it is read, YAML within limits, the
package's own YAML files, and the free-memory figure the checks and loaders share."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from perfscout.errors import InputError
from perfscout.io import (YAMLLimitError, YAMLLimits, available_bytes, check_output_dir, load_package_yaml,
                          load_yaml, load_yaml_file, read_input_bytes, read_input_text)


def test_load_yaml_file_reads_a_users_spec(tmp_path):
    spec = tmp_path / "bench.yaml"
    spec.write_text("\ufeffbenchmarks:\n  - {name: a, command: [true]}\n", encoding="utf-8")  # a BOM is fine
    assert load_yaml_file(spec, "bench spec") == {"benchmarks": [{"name": "a", "command": [True]}]}


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.yaml", "bench spec not found"),
    (lambda d: d, "it is a directory"),
    (lambda d: (os.mkfifo(d / "fifo"), d / "fifo")[1], "it is a FIFO"),
    (lambda d: ((d / "latin1.yaml").write_bytes(b"name: caf\xe9\n"), d / "latin1.yaml")[1], "not UTF-8"),
])
def test_a_file_that_is_not_a_document_is_refused_unread(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(InputError, match=message):
        load_yaml_file(path, "bench spec")


def test_a_file_over_the_callers_limit_is_refused_unread(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" * 10)
    with pytest.raises(InputError, match="more than the limit for this kind of file"):
        read_input_text(big, "bench spec", max_bytes=20)


def test_dev_zero_is_refused_before_any_read():
    with pytest.raises(InputError, match="it is a device"):
        read_input_bytes("/dev/zero", "profile")


def test_yaml_limits_refuse_an_alias_bomb_and_deep_nesting_with_the_line(tmp_path):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    with pytest.raises(YAMLLimitError, match="alias bomb"):
        load_yaml(bomb, "spec.yaml")
    with pytest.raises(YAMLLimitError, match=r"spec.yaml:1: YAML nested more than 64 levels"):
        load_yaml("[" * 100 + "]" * 100, "spec.yaml")
    with pytest.raises(YAMLLimitError, match=r"spec.yaml:\d+:\d+: YAML syntax error"):
        load_yaml("a: 1\nb: {c: 1\nd: 2\n", "spec.yaml")
    assert load_yaml("a: &x [1]\nb: *x\n", limits=YAMLLimits(max_aliases=1)) == {"a": [1], "b": [1]}


def test_load_package_yaml_reads_perfscouts_own_files_and_nothing_else():
    vocab = load_package_yaml("perfscout.graph", "vocabulary.yaml")
    assert "codecs" in vocab and "questions" in vocab
    assert "devices" in load_package_yaml("perfscout.platform_profiles", "specs.yaml")
    with pytest.raises(InputError, match="cannot read perfscout.graph/absent.yaml"):
        load_package_yaml("perfscout.graph", "absent.yaml")


def test_check_output_dir_refuses_a_folder_of_someone_elses(tmp_path):
    check_output_dir(tmp_path / "new", "samples.json", "bench")  # new: fine
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    with pytest.raises(InputError, match=r"thesis.tex.*choose a new or empty --out"):
        check_output_dir(tmp_path / "mine", "samples.json", "bench")


def test_available_bytes_follows_the_address_space_limit():
    free = available_bytes()
    assert free > 0
    # in a child whose RLIMIT_AS is 1 GiB, the figure is at most 1 GiB
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2**30, resource.getrlimit("
            "resource.RLIMIT_AS)[1])); from perfscout.io import available_bytes; print(available_bytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert 0 < int(out.stdout) <= 2**30
