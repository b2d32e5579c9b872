"""Reading a file a user named (a spec, a profile, a timings JSON): what it must be first.

``Path.read_text`` trusts the path. Named ``/dev/zero`` it reads forever while memory
fills, a FIFO blocks until someone writes to it, and a 20 GB log is read whole before
anything can say it is not a profile. Every input file perfscout parses goes through
:func:`read_input_bytes` / :func:`read_input_text`, which refuse, with the path and the
reason, before reading: a missing path, a directory, a device, a FIFO or socket (anything
that is not a regular file once symlinks are followed; a symlink loop says so), a file
larger than the caller's limit or than this machine's free memory allows to parse, and (for
compressed streams) a sparse file, judged from its allocated blocks. The free-memory figure
(:func:`available_bytes`) is here too, beside the check that first needs it; the data loaders
and synthetic fields ask it before allocating a field.
"""

from __future__ import annotations

import errno
import os
import resource
import stat
from pathlib import Path

from perfscout.errors import InputError

#: Parsing text costs a few times its bytes (the bytes, the str, the parsed rows).
PARSE_BYTES_PER_BYTE = 4
#: Specs and small JSON documents: far larger than any real one.
SMALL_DOCUMENT_BYTES = 16 * 2**20


def available_bytes() -> int:
    """MemAvailable (or physical memory), lowered to this process's address-space limit:
    what a field about to be allocated here may take (generated, decoded, loaded)."""
    avail = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not avail:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            avail = 1 << 62
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return min(avail, soft) if soft != resource.RLIM_INFINITY else avail


#: A file this size or larger whose allocated blocks cover less than half of it has holes.
_SPARSE_MIN_BYTES = 2**20


def check_input_file(path: str | os.PathLike[str], what: str, max_bytes: int | None = None,
                     *, dense: bool = False) -> int:
    """The size of ``path`` if it is a regular file perfscout may read whole, else InputError.

    Sized before any read from both figures the file system gives: the apparent size (what
    a read returns, holes included) against the limit, and, with ``dense=True`` (compressed
    streams, which are never mostly zeros), the allocated blocks: a file whose blocks cover
    less than half of it and that has a hole (``SEEK_HOLE``) is refused as sparse, the 3 GiB
    of nothing a forged stream would otherwise make perfscout read into memory."""
    p = Path(path)
    try:
        st = os.stat(p)  # follows symlinks: what would be read
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"cannot read {what} {p}: it is a symlink loop") from None
        if exc.errno == errno.ENOENT:
            raise InputError(f"{what} not found: {p} (cannot read it: no such file)") from None
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from None
    _check_stat(p, st, what, max_bytes, dense)
    return st.st_size


def _check_stat(p: Path, st: os.stat_result, what: str, max_bytes: int | None, dense: bool,
                fd: int | None = None) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot read {what} {p}: it is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise InputError(f"cannot read {what} {p}: it is {kind}, not a regular file (save the output to a file)")
    allocated = st.st_blocks * 512
    if dense and st.st_size >= _SPARSE_MIN_BYTES and allocated < st.st_size // 2 and _has_hole(p, st, fd):
        raise InputError(f"{what} {p} is sparse: {st.st_size / 2**20:.1f} MiB long but only "
                         f"{allocated / 2**20:.1f} MiB of it is on disk (the rest is holes, read as zeros); "
                         "a compressed stream has no holes: is it the right file?")
    if max_bytes is None:
        limit = available_bytes() // PARSE_BYTES_PER_BYTE
    else:
        limit = max_bytes
    if st.st_size > limit:
        why = "the limit for this kind of file" if max_bytes is not None else "what this machine's free memory can parse"
        raise InputError(f"{what} {p} is {st.st_size / 2**20:.1f} MiB, more than {why} "
                         f"({limit / 2**20:.1f} MiB); is it the right file?")


def _has_hole(p: Path, st: os.stat_result, fd: int | None) -> bool:
    """Does the file have a hole before its end? (Where SEEK_HOLE is not supported, a
    file this short of blocks is taken to have one: compressed file systems report fewer
    blocks, but a compressed stream does not compress.)"""
    own = fd is None
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC) if own else fd
        try:
            return os.lseek(fd, 0, os.SEEK_HOLE) < st.st_size
        finally:
            if own:
                os.close(fd)
    except (OSError, AttributeError):
        return True


def read_input_bytes(path: str | os.PathLike[str], what: str, max_bytes: int | None = None,
                     *, dense: bool = False) -> bytes:
    """The bytes of a regular file (see :func:`check_input_file`); InputError otherwise.
    Checked on the descriptor that is read (a path swapped after the check is not read), and
    never more than the size that passed the check."""
    p = Path(path)
    check_input_file(p, what, max_bytes, dense=dense)  # the errors by name, before opening
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        _check_stat(p, st, what, max_bytes, dense, fd=f.fileno())
        try:
            data = f.read(st.st_size + 1)
        except OSError as exc:
            raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > st.st_size:
        raise InputError(f"{what} {p} grew while it was being read; not read")
    return data


def read_input_text(path: str | os.PathLike[str], what: str, max_bytes: int | None = SMALL_DOCUMENT_BYTES) -> str:
    """A UTF-8 text file (a spec, a JSON document); InputError naming the file otherwise."""
    data = read_input_bytes(path, what, max_bytes)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start}: "
                         f"{data[exc.start:exc.start + 1]!r})") from None


def output_dir_entries(out: str | os.PathLike[str], what: str) -> list[str] | None:
    """The sorted names in the output directory ``out``, or None when it does not exist yet;
    InputError when it is a file or cannot be listed (``what`` names its use)."""
    p = Path(out)
    if not p.exists():
        return None
    if not p.is_dir():
        raise InputError(f"cannot use {p} as the {what} directory: it is a file, not a directory")
    try:
        return sorted(os.listdir(p))
    except OSError as exc:
        raise InputError(f"cannot read the {what} directory {p}: {exc.strerror or exc}") from None


def check_output_dir(out: str | os.PathLike[str], marker: str, what: str) -> None:
    """InputError unless ``out`` is new, empty, or an earlier ``what`` run (it holds
    ``marker``): a run directory is the one place a sandboxed program may write, and its
    own files (samples.json, raw/, ...) are written there, so a folder of the user's (their
    project, their results) is never handed over."""
    p = Path(out)
    entries = output_dir_entries(p, what)
    if entries is None:
        return
    if entries and marker not in entries:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise InputError(f"{p} holds files that are not a {what} run's ({shown}); the {what} writes its results "
                         "there and the benchmarked program may write there too: choose a new or empty --out")
