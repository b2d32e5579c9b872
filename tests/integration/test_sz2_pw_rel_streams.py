"""SZ 2.1's pw_rel streams are not the same from one process to the next; their values are.

A finding about someone else's compressor (hdf5plugin's SZ 2.1): in pw_rel mode one byte
of the stream header is left unset, so fresh processes compressing the same field at the
same bound write streams that differ in it (and, when the final zstd pass compresses the
header, in size by a few bytes). The decoded values are identical. Every record of sz2
pw_rel says so (``SZ2Codec.known_behaviour``), so that nobody reads a stream hash or a
ratio a few bytes off as a change; abs and rel streams are byte-for-byte reproducible and
carry no such note.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.tools.evaluate import evaluate_full

ROOT = Path(__file__).resolve().parents[2]

_CHILD = r"""
import hashlib, json, sys
import numpy as np
from perfscout.codecs.registry import get_codec
rng = np.random.default_rng(5)
x = np.cumsum(rng.standard_normal((64, 64, 64)), axis=2).astype(np.float32) + 50
out = {}
for mode, bound in (("abs", 1e-2), ("rel", 1e-3), ("pw_rel", 1e-3)):
    c = get_codec("sz2", mode, bound)
    p = c.compress(x)
    out[mode] = {"stream": bytes(p.data).hex(), "values": hashlib.sha256(c.decompress(p).tobytes()).hexdigest()}
print(json.dumps(out))
"""


def _fresh_process_streams() -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_sz2_streams_across_fresh_processes_keep_their_values() -> None:
    pytest.importorskip("hdf5plugin")
    runs = [_fresh_process_streams() for _ in range(3)]
    for mode in ("abs", "rel"):  # reproducible to the byte
        assert len({r[mode]["stream"] for r in runs}) == 1, f"sz2 {mode} streams differ between processes"
    # pw_rel: whatever the stream's bytes, the values decoded from it are the same, and the
    # streams differ (if at all) in a handful of bytes, not in what they encode
    assert len({r["pw_rel"]["values"] for r in runs}) == 1
    streams = [bytes.fromhex(r["pw_rel"]["stream"]) for r in runs]
    for s in streams[1:]:
        assert abs(len(s) - len(streams[0])) <= 8
        if len(s) == len(streams[0]):
            assert sum(a != b for a, b in zip(s, streams[0])) <= 4


def test_every_sz2_pw_rel_record_says_its_stream_varies_and_other_modes_do_not() -> None:
    pytest.importorskip("hdf5plugin")
    x = np.cumsum(np.random.default_rng(2).standard_normal((32, 48)), axis=1).astype(np.float32) + 20
    pw = evaluate_full(x, "sz2", "pw_rel", 1e-3, repeats=1, isolate=False)
    assert pw.result.status == "ok" and pw.result.bound_ok
    assert any("differ from one process to the next" in n and "decoded values do not" in n for n in pw.notes)
    for mode, bound in (("abs", 1e-2), ("rel", 1e-3)):
        ev = evaluate_full(x, "sz2", mode, bound, repeats=1, isolate=False)
        assert ev.result.status == "ok" and not any("process to the next" in n for n in ev.notes)
