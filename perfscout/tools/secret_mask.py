"""What a folder bound into the sandbox must not show: secrets by name, and host endpoints.

The working directory and declared inputs are bound read-only so that a benchmark can read
its own sources and data. Bound whole, they also bring whatever else lies beneath: a nested
repository's ``.git/config`` with a token in its remote URL, ``.env`` files, ``~/.ssh`` when
the program runs from the home directory, key files, and Unix sockets or FIFOs through which
host services answer. :func:`vet_tree` walks such a folder once, within a budget, and names
what to mask: directories and files whose names mark them as credentials or history (see
:data:`SECRET_DIRS`, :data:`SECRET_FILES`, :data:`SECRET_SUFFIXES`), under any backup or
editor variant of the name (``.git-credentials.bak``, ``.netrc~``, ``.id_rsa.swp``:
:data:`BACKUP_TAIL`), files and folders whose *path* marks them as a tool's token store
(``~/.config/hub``, ``~/.config/glab-cli``, ``~/.m2/settings.xml``: :data:`SECRET_SUBFILES`,
:data:`SECRET_SUBDIRS`; anything inside a secret folder is masked wherever the walk starts),
and every socket, FIFO and device node (bound over with ``/dev/null``, so a ``connect`` is
refused and a write goes nowhere). Masked directories are not walked further.

Names are not enough: a key saved as ``notes/backup.txt`` or a hard link of ``~/.ssh/id_rsa``
under ``data/x.dat`` says nothing by its name. So every other regular file is also looked at
**by content** (its first :data:`CONTENT_BYTES` bytes: PEM and OpenSSH private keys, PGP
private key blocks, AWS secret keys, a GCP service-account's ``private_key``, URLs with a
password or token in them, well-known token formats; see :data:`CONTENT_PATTERNS`) and
**by identity** (same ``st_dev``/``st_ino`` as a credential file of the home directory,
:data:`HOME_SECRETS`, whatever its name here). The walk itself only lists and stats; the heads
are read by a child process (:func:`content_secrets`), never by this one: closing a file here
would drop every POSIX lock this process holds on it, and the folders vetted hold the SQLite
stores this process is writing.

Measured (``benchmarks/sandbox_overhead.py --walk``, a tree of 20,200 entries, 20,000 files of
512 bytes, on the 2-core dev VM shared with other jobs): 0.58-0.60 s with the content read
(~29 µs an entry; 50,200 entries: 2.1-2.6 s) at load ~3, 1.4-1.8 s at load 5-6, where names,
stat and hard links alone took 0.42-0.47 s (the content read is an open, one read of at most
:data:`CONTENT_BYTES`, a close and a few literal checks per file). The name check is ~1.3 µs
an entry with the backup variants, word globs and path tails (as before them: the globs are
sorted by shape, see :class:`_Globs`); the same 20,000-file walk measured 24-28 µs an entry
before and after them (same VM, load ~1, interleaved runs). With the heads read by the child
process: 0.63-0.68 s for 20,000 files, 1.4-1.9 s for 50,000 entries (first and warm walk, no other job)
(``benchmarks/results/sandbox_overhead_cpu_heads_out_of_process.json``). The walk stops at :data:`WALK_MAX_ENTRIES`
entries or :data:`WALK_MAX_SECONDS`, whichever comes first, and reads at most
:data:`CONTENT_BYTES` of any file (a key past a file's first 4 KiB is not seen: key and
credential files start with what gives them away). A folder that
cannot be vetted within that budget is *not* bound whole (see :mod:`perfscout.tools.bwrap`):
the sandbox then shows only the paths the command names and the inputs the user declared,
each vetted in turn. Unvetted means unseen, never "seen unchecked".
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: Directory names (lower-cased) that hold credentials, keys or another tool's private
#: state, wherever they are (a backup copy too: ``.ssh.bak``, ``.aws.old``, see
#: :data:`BACKUP_TAIL`).
SECRET_DIRS: frozenset[str] = frozenset({
    ".git", ".hg", ".svn", ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".password-store",
    ".gcloud", ".oci", ".terraform.d", ".vault-token", ".pki", ".keyrings", "keyrings", ".mozilla",
    ".thunderbird", ".cert", ".certs", ".secrets", "secrets",
    # per-tool folders of a home that hold tokens or keys and nothing a benchmark reads
    ".kaggle", ".huggingface", ".fly", ".ibmcloud", ".bluemix", ".aliyun", ".tccli", ".minikube",
    ".databricks", ".snowsql",
})
#: Directory paths (the tail of a path, usually under a home) that hold tokens: gh, glab,
#: gcloud, doctl, heroku, the container tools, browsers' profiles. Matched on the entry's
#: full path, so a walk rooted at ``~/.config`` (or at the folder itself) sees them too.
SECRET_SUBDIRS: tuple[str, ...] = (
    ".config/gh", ".config/glab-cli", ".config/gcloud", ".config/hub", ".config/doctl", ".config/heroku",
    ".local/share/heroku", ".config/hcloud", ".config/netlify", ".config/configstore", ".config/vercel",
    ".local/share/com.vercel.cli", ".config/stripe", ".config/scw", ".config/exoscale", ".config/openstack",
    ".config/containers", ".config/helm", ".config/tea", ".config/github-copilot", ".config/sops",
    ".config/bitwarden cli", ".config/google-chrome", ".config/chromium", ".config/bravesoftware",
    ".config/rclone", ".config/op", ".local/share/keyrings", ".local/share/kwalletd",
    ".config/code/user/globalstorage", ".config/ngrok", ".ngrok2", ".wrangler/config",
)
#: File paths (the tail of a path) whose names alone say nothing: hub keeps its GitHub oauth
#: token in the *file* ``~/.config/hub``; maven, gradle, bundler, composer, NuGet, CircleCI,
#: Travis and Hugging Face keep theirs in files with ordinary names.
SECRET_SUBFILES: tuple[str, ...] = (
    ".config/hub", ".m2/settings.xml", ".m2/settings-security.xml", ".gradle/gradle.properties",
    ".bundle/config", ".composer/auth.json", ".config/composer/auth.json", ".config/containers/auth.json",
    ".docker/config.json", ".circleci/cli.yml", ".travis/config.yml", ".nuget/nuget/nuget.config",
    ".config/nuget/nuget.config", ".cache/huggingface/token", ".huggingface/token", ".config/linode-cli",
    ".codex/auth.json",
)
#: File names (globs, matched case-insensitively) that are secrets wherever they are, and
#: under any backup or editor variant of the name (:data:`BACKUP_TAIL`).
#:
#: ``*credentials*`` takes every extension: ``credentials.csv`` (AWS's download),
#: ``.git-credentials``, cargo's ``credentials.toml``, ``credentials.tfrc.json`` -- and a
#: ``credentials.py``. Chosen so on purpose: a module of that name (a Django project's, a
#: script's) is where people write the literal keys the rest of the code imports, and the
#: two errors are not alike: masked wrongly, the program sees an empty file and fails
#: visibly; left readable wrongly, a key leaks and nothing says so. ``*secret*`` is *not*
#: taken: Python's own ``secrets.py`` and perfscout's ``secret_mask.py`` are code, not keys.
SECRET_FILES: tuple[str, ...] = (
    ".env", ".env.*", "*.env", ".envrc", ".netrc", "_netrc", ".authinfo", ".authinfo.*", "*credentials*",
    ".gitconfig", ".pypirc", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pgpass", ".my.cnf", ".mylogin.cnf",
    ".s3cfg", ".boto", ".dockercfg", ".htpasswd", ".vault-token", ".terraformrc", ".databrickscfg",
    ".passwd-s3fs", "secrets.yml", "secrets.yaml", "secrets.json", "secrets.toml", "secrets.env", "*.secret",
    "*.secrets", "client_secret*.json", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", "id_xmss*", "*_rsa",
    "*_dsa", "*_ecdsa", "*_ed25519", "*deploy*key*", "*private*key*", "ssh_host_*key*", "authorized_keys",
    "known_hosts", ".*_history", ".lesshst", ".viminfo", ".token", "*.token", ".xauthority", ".iceauthority",
    "*.keyring", "*.kdbx", "*.keytab", "krb5cc_*", "kubeconfig", "service-account*.json", "access_tokens.db",
)
#: File suffixes of key material and certificates.
SECRET_SUFFIXES: tuple[str, ...] = (
    ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".asc", ".gpg", ".pgp", ".ppk", ".crt",
    ".cer", ".der", ".csr", ".ovpn", ".tfstate", ".tfvars",
)
#: What editors, package managers and people append to a file they copy or back up
#: (``.bak``, ``~``, ``.old``, ``.orig``, ``.save``, vim's ``.swp``, dpkg's ``.dpkg-old``,
#: ``.~1~``, `` (1)``, ``-copy``, a number or a date), repeated: a secret name with any of these
#: after it is the same secret. Vim's swap file of ``F`` is ``.F.swp`` (the dot is stripped
#: again) and emacs's autosave is ``#F#``.
BACKUP_WORDS: tuple[str, ...] = (
    "bak", "backup", "bkp", "bck", "old", "orig", "original", "save", "saved", "sav", "swp", "swo", "swn", "swx",
    "tmp", "temp", "copy", "prev", "previous", "new", "rej", "dist", "disabled", "off", "rpmsave", "rpmnew",
)
BACKUP_TAIL = re.compile(
    r"(?:[._-](?:dpkg-|ucf-)?(?:" + "|".join(BACKUP_WORDS) + r")\d*"
    r"|[._-]\d+|~\d*|\.~\d+~| copy(?: \d+)?| \(\d+\))+\Z")
#: How a name with a backup tail ends once its trailing digits are dropped: a name ending
#: otherwise (``bench.py``, ``data.f32``) has none, and :data:`BACKUP_TAIL` (1.5-3.5 µs a name:
#: it is tried at every position) is not run on it (one ``str.endswith``, ~0.1 µs).
_TAIL_ENDS: tuple[str, ...] = (*BACKUP_WORDS, ".", "-", "_", "~", ")")

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
    ".terraform.d/credentials.tfrc.json", ".config/rclone/rclone.conf", ".config/hub",
    ".config/glab-cli/config.yml", ".config/doctl/config.yaml", ".cargo/credentials", ".cargo/credentials.toml",
    ".config/git/credentials", ".cache/huggingface/token", ".huggingface/token", ".kaggle/kaggle.json",
    ".databrickscfg", ".m2/settings.xml", ".gradle/gradle.properties", ".mylogin.cnf", ".authinfo",
)
#: Folders of a home whose every file counts (keys by any name).
HOME_SECRET_DIRS: tuple[str, ...] = (".ssh", ".gnupg/private-keys-v1.d", ".aws", ".docker", ".kube")
#: Masks one folder may need before it counts as too many to bind one by one.
MAX_MASKS = 2_000

class _Globs:
    """The globs and suffixes sorted by shape, so that an ordinary name costs a set look-up
    and a few C-level string scans, not a regex alternation of sixty ``.*?`` scans (the one
    compiled pattern took ~2-3 µs a name, sixty ``fnmatch`` calls ~40): exact names, ``*X``
    (``str.endswith``), ``X*`` (``str.startswith``), and, only for a name holding one of
    their literals (one regex search over the name), the rest: ``*X*`` (``in``) and other
    shapes (``client_secret*.json``, ``.*_history``, one compiled pattern each for the
    anchored ones and the *word* ones, ``*credentials*``, ``*deploy*key*``)."""

    def __init__(self, globs: Iterable[str], suffixes: Iterable[str]) -> None:
        exact, ends, starts, contains, anchored, words, needed = set(), list(suffixes), [], [], [], [], []
        for g in (g.lower() for g in globs):
            inner = g.strip("*")
            is_word = len(g) > 1 and g.startswith("*") and g.endswith("*")
            if is_word and not any(c in inner for c in "*?["):
                contains.append(inner)
                needed.append(inner)
            elif "*" in inner or "?" in inner or "[" in inner:
                (words if is_word else anchored).append(fnmatch.translate(g))
                # the longest literal run: every name the glob matches contains it
                needed.append(max(re.split(r"[*?]|\[[^]]*\]", g), key=len))
            elif g.startswith("*"):
                ends.append(inner)
            elif g.endswith("*"):
                starts.append(inner)
            else:
                exact.add(g)
        self.exact, self.ends, self.starts, self.contains = frozenset(exact), tuple(ends), tuple(starts), tuple(contains)
        self.anchored = re.compile("|".join(anchored)) if anchored else None
        self.words = re.compile("|".join(words)) if words else None
        self.needed = re.compile("|".join(map(re.escape, needed))) if needed else None

    def match(self, low: str) -> str:
        """"name" (an exact name, a prefix, a suffix, an anchored glob), "word" (only a word
        glob: ``*credentials*``), or ""."""
        if low in self.exact or low.endswith(self.ends) or low.startswith(self.starts):
            return "name"
        if self.needed is None or self.needed.search(low) is None:
            return ""
        if self.anchored is not None and self.anchored.match(low) is not None:
            return "name"
        if any(c in low for c in self.contains) or (self.words is not None and self.words.match(low) is not None):
            return "word"
        return ""


_SECRET_NAMES = _Globs(SECRET_FILES, SECRET_SUFFIXES)


def _by_last(paths: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """last component -> the parent tails it must follow (``.config/hub`` -> ``hub``: (``/.config``,))."""
    out: dict[str, list[str]] = {}
    for sub in paths:
        parent, _, last = sub.lower().rpartition("/")
        out.setdefault(last, []).append("/" + parent)
    return {k: tuple(v) for k, v in out.items()}


#: The path tails indexed by their last component: an entry's full path is compared only when
#: its name is one of these (a dict look-up an entry, not thirty ``endswith``).
_SUBDIRS_BY_NAME = _by_last(SECRET_SUBDIRS)
_SUBFILES_BY_NAME = _by_last(SECRET_SUBFILES)


def name_stems(name: str) -> tuple[str, ...]:
    """``name`` lower-cased, and the name it copies when it is a backup or editor variant
    (``.git-credentials.bak`` -> ``.git-credentials``; ``.id_rsa.swp`` -> ``.id_rsa``,
    ``id_rsa``; ``#.netrc#`` -> ``.netrc``): every spelling a secret's name may hide under."""
    low = name.lower()
    s = low[1:-1] if len(low) > 2 and low.startswith("#") and low.endswith("#") else low
    if s.rstrip("0123456789").endswith(_TAIL_ENDS):
        s = BACKUP_TAIL.sub("", s) or s
    if s == low:
        return (low,)  # the common case: an ordinary name, no variant to try
    if s.startswith(".") and len(s) > 1 and s != low[1:]:
        return (low, s, s[1:])  # vim's ".F.swp" of F (a dot put before the name)
    return (low, s)


def _under(path: str, name: str, index: dict[str, tuple[str, ...]]) -> bool:
    parents = index.get(name)
    if not parents or not path:
        return False
    parent = os.path.dirname(path.lower())
    return any(parent.endswith(t) or parent == t[1:] for t in parents)


#: Where a word glob (``*credentials*``, ``*private*key*``) does not mask *code*: installed
#: third-party packages (botocore's and google-auth's ``credentials.py``, oauthlib's
#: ``client_credentials.py``) are published code that holds no key of the user's, and a
#: benchmark importing boto3 from a ``PYTHONPATH`` folder (vetted like the data) must not find
#: them empty. The exact names, suffixes and the content scan still apply there.
INSTALLED_CODE_DIRS: tuple[str, ...] = ("/site-packages/", "/dist-packages/")
INSTALLED_CODE_SUFFIXES: tuple[str, ...] = (".py", ".pyc", ".pyi", ".pyx", ".pxd", ".so", ".pyd", ".c", ".cc", ".h")


def is_secret_file(name: str, path: str | os.PathLike[str] = "") -> bool:
    """A file that holds a secret by its name (a worktree's ``.git`` file included), or by
    its path's tail (``path``: ``~/.config/hub``, ``~/.m2/settings.xml``), under any backup
    or editor variant of either. A name matched only by a word glob is not a secret as the
    code of an installed package (:data:`INSTALLED_CODE_DIRS`)."""
    p = os.fspath(path)
    for stem in name_stems(name):
        if stem in SECRET_DIRS or _under(p, stem, _SUBFILES_BY_NAME):
            return True
        how = _SECRET_NAMES.match(stem)
        if how == "name" or (how == "word" and not (stem.endswith(INSTALLED_CODE_SUFFIXES)
                                                    and any(d in p for d in INSTALLED_CODE_DIRS))):
            return True
    return False


def is_secret_dir(name: str, rel: str | os.PathLike[str]) -> bool:
    """A directory whose whole content is secret: by name (:data:`SECRET_DIRS`), or by its
    path's tail (``rel``, relative or absolute: :data:`SECRET_SUBDIRS`), backup copies too."""
    p = os.fspath(rel)
    return any(stem in SECRET_DIRS or _under(p, stem, _SUBDIRS_BY_NAME) for stem in name_stems(name))


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
    #: files whose head is still to be read (the walk collects them; :func:`_read_heads` reads them)
    unread: list[Path] = field(default_factory=list, repr=False)

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


#: The head reader run in a child process (``python -I -S``: the standard library only). It
#: gets the patterns and the paths on stdin and answers, a line per path, the index of the
#: first pattern whose literal and expression the head holds (-1: none; -2: unreadable) and
#: the bytes read; it stops at its deadline (the parent then counts the rest as unseen).
_HEAD_READER = r"""
import json, os, re, sys, time
head = json.loads(sys.stdin.buffer.readline())
rules = [(re.compile(rx.encode("latin-1")), [lit.encode("latin-1") for lit in lits]) for rx, lits in head["rules"]]
deadline = time.monotonic() + head["seconds"]
out = sys.stdout
for raw in sys.stdin.buffer.read().split(b"\0"):
    if not raw:
        continue
    if time.monotonic() > deadline:
        break
    try:
        fd = os.open(raw, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        out.write("-2 0\n")
        continue
    try:
        data = os.read(fd, head["bytes"])
    except OSError:
        out.write("-2 0\n")
        continue
    finally:
        os.close(fd)
    low = data.lower()
    hit = next((i for i, (rx, lits) in enumerate(rules) if any(x in low for x in lits) and rx.search(data)), -1)
    out.write(f"{hit} {len(data)}\n")
out.flush()
"""


def content_secrets(paths: list[Path], *, seconds: float = WALK_MAX_SECONDS) -> list[tuple[str, int]]:
    """For each of ``paths``, in order: (what its first :data:`CONTENT_BYTES` bytes hold that
    is a credential, or ""; bytes read). Shorter than ``paths`` when the reader ran past
    ``seconds`` or failed: the paths after the last answer were not seen (the caller counts
    them unvetted). Never blocks on a FIFO (O_NONBLOCK), never follows a link.

    The heads are read **in a child process**, never here: opening and closing a file in
    this process drops every POSIX lock the process holds on it (fcntl's rule), and the
    folders vetted hold SQLite stores that this process (a sweep driver, the agent's other
    threads) has open. Closing an fd on a store's file here once let another process's
    close checkpoint and delete the WAL the driver was still writing into: the sweep's
    results went to a deleted file."""
    if not paths:
        return []
    rules = [[rx.pattern.decode("latin-1"), [lit.decode("latin-1") for lit in lits]] for _, rx, lits in _CONTENT_RE]
    header = json.dumps({"rules": rules, "bytes": CONTENT_BYTES, "seconds": max(0.05, seconds)}).encode()
    payload = header + b"\n" + b"\0".join(os.fsencode(p) for p in paths)
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _HEAD_READER], input=payload,
                              capture_output=True, timeout=max(0.05, seconds) + 10, check=False)
        lines = done.stdout.decode("ascii", errors="replace").splitlines() if done.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        lines = []
    out: list[tuple[str, int]] = []
    for line in lines[:len(paths)]:
        try:
            hit, n = (int(x) for x in line.split())
        except ValueError:  # not the reader's line: nothing after it counts as seen
            break
        out.append((_CONTENT_RE[hit][0] if 0 <= hit < len(_CONTENT_RE) else "", n))
    return out


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
    # Inside a secret folder, everything is (``~/.ssh/keys``, a file named as
    # ``~/.kube/config``): the same entry is masked whether the walk starts above it or at
    # it, so naming it directly shows nothing a walk from its parent would hide.
    if any(is_secret_dir(a.name, a) for a in (root, *root.parents) if a.name):
        (v.dirs if stat.S_ISDIR(st.st_mode) else v.files).append(root)
        return v
    if not stat.S_ISDIR(st.st_mode):
        _classify_file(v, root, st, inodes)
        _read_heads(v, max_seconds)
        v.seconds = time.monotonic() - start
        return v
    skipped = {str(p) for p in skip}
    stack: list[Path] = [root]
    while stack:
        d = stack.pop()
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
                p = Path(e.path)
                try:
                    if e.is_symlink():
                        continue
                    if e.is_dir(follow_symlinks=False):
                        if is_secret_dir(e.name, e.path):
                            v.dirs.append(p)
                        elif e.path not in skipped:
                            stack.append(p)
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
    if not v.too_large:
        _read_heads(v, max_seconds - (time.monotonic() - start))
        if len(v.masks) > MAX_MASKS:
            v.too_large = f"more than {MAX_MASKS} entries to mask"
    v.seconds = time.monotonic() - start
    return v


def _read_heads(v: Vetting, seconds: float) -> None:
    """The content verdicts of the files the walk left unread, within what is left of the
    budget; those not read in time make the folder too large to vet (unvetted is unseen)."""
    todo, v.unread = v.unread, []
    got = content_secrets(todo, seconds=max(seconds, 0.5))
    for p, (why, n) in zip(todo, got):
        v.scanned += 1
        v.bytes_read += n
        if why:
            v.files.append(p)
            v.by_content[p] = why
    if len(got) < len(todo):
        v.too_large = f"reading its files' heads ran past the time budget ({len(got)} of {len(todo)} read)"


def _classify_file(v: Vetting, p: Path, st: os.stat_result, inodes: dict[tuple[int, int], str]) -> None:
    """A file's verdict: an endpoint, a secret by name, by identity or by content, or none."""
    mode = st.st_mode
    if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        v.endpoints.append(p)
        return
    if not stat.S_ISREG(mode):
        return
    if is_secret_file(p.name, p):
        v.files.append(p)
        return
    same = inodes.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None
    if same is not None:
        v.files.append(p)
        v.by_link[p] = same
        return
    if st.st_size == 0:
        return
    v.unread.append(p)  # its head is read after the walk, out of process (content_secrets)
