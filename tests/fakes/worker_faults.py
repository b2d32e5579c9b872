"""Codecs that misbehave towards the process *running* the task, for distributed sweeps.

Importing this module registers two codecs (name it as a plug-in:
``plugins: [tests.fakes.worker_faults]``):

- ``fake-slow``: a plain uniform quantizer (real, verified results) that first sleeps
  ``sleep_s`` seconds (option), so a test can kill a worker while the task is in flight;
- ``fake-killer``: SIGKILLs the worker that started the task's process (its parent, or its
  task server's parent): the task "kills every worker it touches", as an OOM-killed node would.
  Never run it with the local executor (its parent would be the sweep itself).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np

from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.registry import register_codec


class _Quantizer(Codec):
    family = "fake"
    device = "cpu"
    native_modes = ("abs",)

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)

    @classmethod
    def version(cls) -> str:
        return "fake 1"

    def _before(self) -> None:
        pass

    def compress(self, array: np.ndarray) -> Compressed:
        self._before()
        q = np.rint(array.astype(np.float64) / (1.8 * self.bound)).astype(np.int64)
        return Compressed(data=q.tobytes(), shape=array.shape, dtype=array.dtype.name, codec_id=self.codec_id,
                          mode=self.mode, bound=self.bound, abs_bound=self.bound)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        q = np.frombuffer(compressed.data, dtype=np.int64).reshape(compressed.shape)
        return (q * (1.8 * self.bound)).astype(compressed.dtype)


class SlowCodec(_Quantizer):
    codec_id = "fake-slow"

    def _before(self) -> None:
        if not getattr(self, "_slept", False):  # once per process: the warm-up call pays it
            time.sleep(float(self.options.get("sleep_s", 1.0)))
            self._slept = True


class WorkerKiller(_Quantizer):
    codec_id = "fake-killer"

    def _before(self) -> None:
        os.kill(_worker_pid(), signal.SIGKILL)
        time.sleep(60)  # PR_SET_PDEATHSIG ends us with the parent


def _worker_pid() -> int:
    """The process that started this task: its parent, or, for a task forked from the
    worker's task server (perfscout.sweep.forkserver), the server's parent."""
    parent = os.getppid()
    try:
        cmdline = open(f"/proc/{parent}/cmdline", "rb").read()
    except OSError:
        return parent
    if b"perfscout.sweep.forkserver" in cmdline:
        with open(f"/proc/{parent}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])  # the server's parent pid
    return parent


register_codec(SlowCodec.codec_id, f"{__name__}:SlowCodec")
register_codec(WorkerKiller.codec_id, f"{__name__}:WorkerKiller")
