"""What a folder bound into the sandbox must not show: secrets by name, and host endpoints.

The working directory and declared inputs are bound read-only so that a benchmark can read
its own sources and data. Bound whole, they also bring whatever else lies beneath: a nested
repository's ``.git/config`` with a token in its remote URL, ``.env`` files, ``~/.ssh`` when
the program runs from the home directory, key files, and Unix sockets or FIFOs through which
host services answer. :func:`vet_tree` walks such a folder once, within a budget, and names
what to mask: directories and files whose names mark them as credentials or history (see
:data:`SECRET_DIRS`, :data:`SECRET_FILES`, :data:`SECRET_SUFFIXES`), and every socket, FIFO
and device node (bound over with ``/dev/null``, so a ``connect`` is refused and a write goes
nowhere). Masked directories are not walked further.

The walk costs about 15-20 µs per entry here (``benchmarks/sandbox_overhead.py`` measures
it); it stops at :data:`WALK_MAX_ENTRIES` entries or :data:`WALK_MAX_SECONDS`. A folder that
cannot be vetted within that budget is *not* bound whole (see :mod:`perfscout.tools.bwrap`):
the sandbox then shows only the paths the command names and the inputs the user declared,
each vetted in turn. Unvetted means unseen, never "seen unchecked".
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: Directory names that hold credentials, keys or another tool's private state.
SECRET_DIRS: frozenset[str] = frozenset({
    ".git", ".hg", ".svn", ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store",
    ".gcloud", ".oci", ".terraform.d", ".vault-token", ".pki", ".keyrings", "keyrings", ".mozilla",
    ".thunderbird", ".cert", ".certs", ".secrets", "secrets",
})
#: Directory paths (relative to a home) that hold tokens: gh, gcloud, browsers' profiles.
SECRET_SUBDIRS: tuple[str, ...] = (
    ".config/gh", ".config/gcloud", ".config/hub", ".config/google-chrome", ".config/chromium",
    ".config/BraveSoftware", ".config/rclone", ".config/op", ".local/share/keyrings",
    ".local/share/kwalletd", ".config/Code/User/globalStorage",
)
#: File names (globs, matched case-insensitively) that are secrets wherever they are.
SECRET_FILES: tuple[str, ...] = (
    ".env", ".env.*", "*.env", ".envrc", ".netrc", "_netrc", ".git-credentials", ".gitconfig",
    ".pypirc", ".npmrc", ".yarnrc", ".pgpass", ".my.cnf", ".s3cfg", ".boto", ".dockercfg",
    ".htpasswd", ".vault-token", ".terraformrc", "credentials", "credentials.json", "credentials.yml",
    "credentials.yaml", "credentials.toml", "credentials.db", "*credentials*.json", "secrets.yml",
    "secrets.yaml", "secrets.json", "secrets.toml", "secrets.env", "*.secret", "*.secrets",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "id_xmss*", "*_rsa", "*_dsa", "*_ecdsa",
    "*_ed25519", "authorized_keys", "known_hosts", ".*_history", ".lesshst", ".viminfo", ".token",
    "*.token", ".xauthority", ".iceauthority", "*.keyring", "*.kdbx", "kubeconfig",
    "service-account*.json", "access_tokens.db",
)
#: File suffixes of key material and certificates.
SECRET_SUFFIXES: tuple[str, ...] = (
    ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".asc", ".gpg", ".pgp", ".ppk", ".crt",
    ".cer", ".der", ".csr", ".ovpn", ".tfstate", ".tfvars",
)

#: The walk's budget: entries looked at, and wall time (a slow network file system).
WALK_MAX_ENTRIES = 50_000
WALK_MAX_SECONDS = 3.0
#: Masks one folder may need before it counts as too many to bind one by one.
MAX_MASKS = 2_000

#: The globs and suffixes as one compiled pattern: one match per entry, not sixty fnmatch
#: calls (the walk's cost was the matching: ~40 µs an entry, now ~2).
_SECRET_FILE_RE = re.compile("|".join([*(fnmatch.translate(g.lower()) for g in SECRET_FILES),
                                       *(rf"(?s:.*{re.escape(x)})\Z" for x in SECRET_SUFFIXES)]))


def is_secret_file(name: str) -> bool:
    """A file that holds a secret by its name (a worktree's ``.git`` file included)."""
    if name in SECRET_DIRS:
        return True
    return _SECRET_FILE_RE.match(name.lower()) is not None


def is_secret_dir(name: str, rel: str) -> bool:
    return name in SECRET_DIRS or any(rel == s or rel.endswith("/" + s) for s in SECRET_SUBDIRS)


@dataclass
class Vetting:
    """What :func:`vet_tree` found under one root."""

    root: Path
    dirs: list[Path] = field(default_factory=list)  # masked with an empty read-only tmpfs
    files: list[Path] = field(default_factory=list)  # masked with /dev/null
    endpoints: list[Path] = field(default_factory=list)  # sockets, FIFOs, devices: /dev/null too
    entries: int = 0
    seconds: float = 0.0
    too_large: str = ""  # why the walk stopped early ("" when it saw everything)

    @property
    def masks(self) -> list[Path]:
        return [*self.dirs, *self.files, *self.endpoints]


def vet_tree(root: Path, *, skip: Iterable[Path] = (), max_entries: int | None = None,
             max_seconds: float | None = None) -> Vetting:
    """Walk ``root`` (symlinks not followed: a link's target is masked, or not bound, at its
    own path) and name what must be masked. ``root`` itself a secret: it is the one mask.
    ``skip``: directories not walked into (the Python installation running perfscout, a
    virtualenv inside a project: installations, bound as they are)."""
    max_entries = WALK_MAX_ENTRIES if max_entries is None else max_entries
    max_seconds = WALK_MAX_SECONDS if max_seconds is None else max_seconds
    v = Vetting(root)
    start = time.monotonic()
    try:
        st = os.lstat(root)
    except OSError:
        return v
    if not stat.S_ISDIR(st.st_mode):
        _classify_file(v, root, st.st_mode)
        return v
    if is_secret_dir(root.name, root.name):
        v.dirs.append(root)
        return v
    skipped = {str(p) for p in skip}
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        d, rel_d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError:
            continue  # unreadable to us: unreadable inside as well
        with it:
            for e in it:
                v.entries += 1
                if v.entries > max_entries:
                    v.too_large = f"more than {max_entries} entries"
                    break
                rel = f"{rel_d}/{e.name}" if rel_d else e.name
                p = Path(e.path)
                try:
                    if e.is_symlink():
                        continue
                    if e.is_dir(follow_symlinks=False):
                        if is_secret_dir(e.name, rel):
                            v.dirs.append(p)
                        elif e.path not in skipped:
                            stack.append((p, rel))
                        continue
                    if e.is_file(follow_symlinks=False):
                        if is_secret_file(e.name):
                            v.files.append(p)
                        continue
                    _classify_file(v, p, e.stat(follow_symlinks=False).st_mode)
                except OSError:
                    continue
        if v.too_large:
            break
        if time.monotonic() - start > max_seconds:
            v.too_large = f"walking it took more than {max_seconds:g} s"
            break
        if len(v.masks) > MAX_MASKS:
            v.too_large = f"more than {MAX_MASKS} entries to mask"
            break
    v.seconds = time.monotonic() - start
    return v


def _classify_file(v: Vetting, p: Path, mode: int) -> None:
    if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        v.endpoints.append(p)
    elif stat.S_ISREG(mode) and is_secret_file(p.name):
        v.files.append(p)
