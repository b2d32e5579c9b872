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

Names are not enough: a key saved as ``notes/backup.txt`` or a hard link of ``~/.ssh/id_rsa``
under ``data/x.dat`` says nothing by its name. So every other regular file is also looked at
**by content** (its first :data:`CONTENT_BYTES` bytes: PEM and OpenSSH private keys, PGP
private key blocks, AWS secret keys, a GCP service-account's ``private_key``, URLs with a
password or token in them, well-known token formats; see :data:`CONTENT_PATTERNS`) and
**by identity** (same ``st_dev``/``st_ino`` as a credential file of the home directory,
:data:`HOME_SECRETS`, whatever its name here).

Measured (``benchmarks/sandbox_overhead.py --walk``, a tree of 20,200 entries, 20,000 files of
512 bytes, on the 2-core dev VM shared with other jobs): 0.58-0.60 s with the content read
(~29 µs an entry; 50,200 entries: 2.1-2.6 s) at load ~3, 1.4-1.8 s at load 5-6, where names,
stat and hard links alone took 0.42-0.47 s (the content read is an open, one read of at most
:data:`CONTENT_BYTES`, a close and a few literal checks per file). The walk stops at :data:`WALK_MAX_ENTRIES`
entries or :data:`WALK_MAX_SECONDS`, whichever comes first, and reads at most
:data:`CONTENT_BYTES` of any file (a key past a file's first 4 KiB is not seen: key and
credential files start with what gives them away). A folder that
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
#: How much of each file the content scan reads (the head: key files and credential files
#: start with what gives them away).
CONTENT_BYTES = 4096

#: What marks a file's head as a credential, whatever its name. Written in pieces so that no
#: line of this file matches them (perfscout's own tree is vetted too).
_D5 = "-" * 5
CONTENT_PATTERNS: tuple[tuple[str, bytes], ...] = (
    ("a private key (PEM/OpenSSH/PGP)",
     (_D5 + r"BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?" + _D5).encode()),
    ("an AWS secret key", rb"""(?i)aws_secret_access_key\s*[=:]\s*["']?[A-Za-z0-9/+=]{20,}"""),
    ("an AWS session token", rb"""(?i)aws_session_token\s*[=:]\s*["']?[A-Za-z0-9/+=]{20,}"""),
    ("a cloud service-account key", rb""""private_key"\s*:\s*"[^"]{16,}"""),
    ("a URL with a password or token", rb"""[a-z][a-z0-9+.-]*://[^\s/:@"'<>{}]+:[^\s/@"'<>{}]{6,}@[^\s/@"'<>{}]+"""),
    ("a URL with a token", rb"https?://(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,})@"),
    ("an access token", rb"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}|glpat-[A-Za-z0-9_-]{20,}"
                        rb"|xox[abprs]-[A-Za-z0-9-]{20,}|sk-[A-Za-z0-9_-]{40,})"),
)
#: Literals one of which a match must contain (looked for in the head, lower-cased), so that
#: the slower patterns run only on the few heads that may match: each pattern alone costs
#: 4-240 µs on a 4 KiB head, these checks ~1 µs together.
_PREFILTER: dict[str, tuple[bytes, ...]] = {
    "a private key (PEM/OpenSSH/PGP)": (b"private key",),
    "an AWS secret key": (b"aws_secret_access_key",),
    "an AWS session token": (b"aws_session_token",),
    "a cloud service-account key": (b'"private_key"',),
    "a URL with a password or token": (b"://",),
    "a URL with a token": (b"://",),
    "an access token": (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"glpat-", b"xox", b"sk-"),
}
_CONTENT_RE = [(why, re.compile(rx), _PREFILTER[why]) for why, rx in CONTENT_PATTERNS]

#: Credential files of a home directory: a hard link of one of these is masked under any name.
HOME_SECRETS: tuple[str, ...] = (
    ".netrc", "_netrc", ".git-credentials", ".pgpass", ".pypirc", ".npmrc", ".my.cnf", ".s3cfg",
    ".boto", ".dockercfg", ".vault-token", ".aws/credentials", ".aws/config", ".docker/config.json",
    ".kube/config", ".config/gh/hosts.yml", ".config/gcloud/application_default_credentials.json",
    ".config/gcloud/credentials.db", ".config/gcloud/access_tokens.db", ".azure/accessTokens.json",
    ".terraform.d/credentials.tfrc.json", ".config/rclone/rclone.conf",
)
#: Folders of a home whose every file counts (keys by any name).
HOME_SECRET_DIRS: tuple[str, ...] = (".ssh", ".gnupg/private-keys-v1.d", ".aws", ".docker", ".kube")
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
    scanned: int = 0  # files whose head was read
    bytes_read: int = 0
    by_content: dict[Path, str] = field(default_factory=dict)  # masked file -> what its head held
    by_link: dict[Path, str] = field(default_factory=dict)  # masked file -> the home secret it is

    @property
    def masks(self) -> list[Path]:
        return [*self.dirs, *self.files, *self.endpoints]


def home_secret_inodes(homes: Iterable[Path] | None = None) -> dict[tuple[int, int], str]:
    """(st_dev, st_ino) -> path of every credential file of the home directories ($HOME and
    the user's home in the password database): a hard link of one is the same file."""
    if homes is None:
        homes = {Path(os.path.expanduser("~"))}
        try:
            import pwd

            homes.add(Path(pwd.getpwuid(os.getuid()).pw_dir))
        except (ImportError, KeyError):
            pass
    out: dict[tuple[int, int], str] = {}

    def add(p: Path) -> None:
        try:
            st = os.stat(p)  # a link in the home to the real file: the real file's identity
        except OSError:
            return
        if stat.S_ISREG(st.st_mode):
            out[(st.st_dev, st.st_ino)] = str(p)

    for home in homes:
        for rel in HOME_SECRETS:
            add(home / rel)
        for rel in HOME_SECRET_DIRS:
            try:
                names = os.listdir(home / rel)
            except OSError:
                continue
            for n in names[:200]:
                add(home / rel / n)
    return out


def content_secret(path: str | os.PathLike[str]) -> tuple[str, int]:
    """(what the file's first :data:`CONTENT_BYTES` bytes hold that is a credential, or "";
    bytes read). Never blocks (O_NONBLOCK), never follows a link, never reads further."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "", 0  # unreadable to us: unreadable inside as well
    try:
        head = os.read(fd, CONTENT_BYTES)
    except OSError:
        return "", 0
    finally:
        os.close(fd)
    low = head.lower()
    for why, rx, literals in _CONTENT_RE:
        if any(lit in low for lit in literals) and rx.search(head):
            return why, len(head)
    return "", len(head)


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
    inodes = home_secret_inodes()
    if not stat.S_ISDIR(st.st_mode):
        _classify_file(v, root, st, inodes)
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
                if v.entries % 256 == 0 and time.monotonic() - start > max_seconds:
                    v.too_large = f"walking it took more than {max_seconds:g} s"
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
                    _classify_file(v, p, e.stat(follow_symlinks=False), inodes)
                except OSError:
                    continue
        if v.too_large:
            break
        if not v.too_large and time.monotonic() - start > max_seconds:
            v.too_large = f"walking it took more than {max_seconds:g} s"
            break
        if len(v.masks) > MAX_MASKS:
            v.too_large = f"more than {MAX_MASKS} entries to mask"
            break
    v.seconds = time.monotonic() - start
    return v


def _classify_file(v: Vetting, p: Path, st: os.stat_result, inodes: dict[tuple[int, int], str]) -> None:
    """A file's verdict: an endpoint, a secret by name, by identity or by content, or none."""
    mode = st.st_mode
    if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        v.endpoints.append(p)
        return
    if not stat.S_ISREG(mode):
        return
    if is_secret_file(p.name):
        v.files.append(p)
        return
    same = inodes.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
    if same is not None:
        v.files.append(p)
        v.by_link[p] = same
        return
    if st.st_size == 0:
        return
    why, n = content_secret(p)
    v.scanned += 1
    v.bytes_read += n
    if why:
        v.files.append(p)
        v.by_content[p] = why
