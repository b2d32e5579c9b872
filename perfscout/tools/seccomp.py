"""A seccomp filter for profiled runs: no process inside may trace or write into another.

perf stat counts in the kernel and prints what the kernel says; the profiled program runs
as the same user. Without this filter it could attach to a process of its run with
``ptrace`` (or read and write its memory with ``process_vm_readv/writev``, or
take its descriptors with ``pidfd_getfd``) and change the counts before perf prints them.
The filter makes those four system calls fail with ``EPERM`` for every process of the run
(bubblewrap installs it with ``--seccomp FD`` before starting the launcher). 32-bit and x32
system calls, where the kernel offers them, are refused the same way.

It is built here as classic BPF (``struct sock_filter`` records), because libseccomp's
Python binding is rarely installed. Only x86-64 and AArch64 are known; elsewhere
:func:`filter_bytes` returns None and the run says the profiler is not protected.

``/proc/PID/mem`` is opened with ``open``, which a filter cannot tell from any other
``open``: that hole is closed by where perf runs, not here. perf stat now runs outside the
sandbox, in perfscout's PID namespace, where the program cannot name it; the one process
beside the program inside (the launcher, PID 1) makes itself non-dumpable, which makes the
kernel refuse its ``/proc/PID/mem`` too (see ``Sandbox.run(profiler_channel=True)``). The
filter still keeps the program from tracing the launcher or any process of its own run.
"""

from __future__ import annotations

import os
import platform
import struct

# BPF instruction classes and fields (linux/filter.h, linux/bpf_common.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000  # SECCOMP_RET_ALLOW
_ERRNO_EPERM = 0x00050000 | 1  # SECCOMP_RET_ERRNO | EPERM
# struct seccomp_data: int nr; __u32 arch; ...
_NR, _ARCH = 0, 4

#: (audit arch, {syscall: number}) per native architecture, then its compat architecture.
_ARCHES: dict[str, list[tuple[int, dict[str, int]]]] = {
    "x86_64": [(0xC000003E, {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
                             "pidfd_getfd": 438}),
               (0x40000003, {"ptrace": 26, "process_vm_readv": 347, "process_vm_writev": 348,
                             "pidfd_getfd": 438})],  # i386 on x86-64
    "aarch64": [(0xC00000B7, {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
                              "pidfd_getfd": 438})],
}
_X32_BIT = 0x40000000

DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd")


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_bytes(machine: str | None = None) -> bytes | None:
    """The compiled filter for this machine's architecture, or None where unknown."""
    arches = _ARCHES.get(machine or platform.machine())
    if not arches:
        return None
    prog: list[bytes] = [_ins(_LD_W_ABS, _ARCH)]
    # One block per architecture: "arch == A ? (check A's numbers) : next block".
    blocks: list[list[bytes]] = []
    for audit, numbers in arches:
        body = [_ins(_LD_W_ABS, _NR)]
        nums = sorted(set(numbers.values()))
        if audit == 0xC000003E:  # x32 system calls share the arch value: refuse them all
            body.append(_ins(_JGE_K, _X32_BIT, jt=len(nums) + 1, jf=0))
        for j, nr in enumerate(nums):
            body.append(_ins(_JEQ_K, nr, jt=len(nums) - j, jf=0))
        body += [_ins(_RET_K, _ALLOW), _ins(_RET_K, _ERRNO_EPERM)]
        blocks.append(body)
    for audit_block, (audit, _) in zip(blocks, arches):
        prog.append(_ins(_JEQ_K, audit, jt=0, jf=len(audit_block)))
        prog += audit_block
    prog.append(_ins(_RET_K, _ERRNO_EPERM))  # an architecture we did not expect: nothing runs
    return b"".join(prog)


def filter_fd() -> int | None:
    """A descriptor holding the filter (a memfd, read by bwrap), or None where unknown.
    The caller passes it to the child and closes it afterwards."""
    data = filter_bytes()
    if data is None:
        return None
    fd = os.memfd_create("perfscout-seccomp", 0)  # not CLOEXEC: bwrap must inherit it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
