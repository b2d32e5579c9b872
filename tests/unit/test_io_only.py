"""Every YAML load and every rename-into-place of perfscout goes through ``perfscout.io``.

``perfscout/io/`` holds the one limited YAML loader (``yaml_safe.py``: size, depth, alias
limits; ``load_package_yaml`` for the package's own files) and the one temp-file-and-rename
writer (``atomic.py``). Before it, the same two things were written seven and four times,
and the copies differed (a fixed ``.tmp`` name two writers could share, ``yaml.safe_load`` on a
user's file with no alias limit). This test reads ``perfscout/**/*.py`` outside ``perfscout/io/``
with ``ast`` and fails on

- a YAML load: ``yaml.safe_load``/``load``/``full_load``/``compose``/... or one of PyYAML's
  loader classes, however ``yaml`` was imported (``import yaml as y``, ``from yaml import
  safe_load``);
- a rename: ``os.replace``/``os.rename``/``os.renames``/``shutil.move``, or a one-argument
  ``.replace(target)``/``.rename(target)`` method call (``Path.replace``; ``str.replace`` takes two),

unless it is in :data:`ALLOWED` with its reason. The list can only shrink: an entry whose
call is gone fails too, so a fix strikes it here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import perfscout.io as pio

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "perfscout"

#: PyYAML names that parse a document (dumping is fine: it reads nothing).
YAML_LOADING = frozenset({
    "load", "load_all", "safe_load", "safe_load_all", "full_load", "full_load_all", "unsafe_load",
    "unsafe_load_all", "compose", "compose_all", "parse", "scan",
    "Loader", "SafeLoader", "FullLoader", "UnsafeLoader", "BaseLoader",
    "CLoader", "CSafeLoader", "CFullLoader", "CUnsafeLoader", "CBaseLoader",
})
RENAMES = {("os", "replace"), ("os", "rename"), ("os", "renames"), ("shutil", "move")}

#: (file, enclosing function, call) -> why it is still there. Shrink it.
ALLOWED: dict[tuple[str, str, str], str] = {}


def _calls(path: Path) -> list[tuple[str, str, int]]:
    """(enclosing function, offending name, line) for every YAML load or rename in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    aliases: dict[str, str] = {}  # local name -> module ("y" -> "yaml"), or "yaml.safe_load"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in ("yaml", "os", "shutil"):
                    aliases[a.asname or a.name] = a.name
        elif isinstance(node, ast.ImportFrom) and node.module in ("yaml", "os", "shutil") and not node.level:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"

    def offending(expr: ast.AST) -> str | None:
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            module = aliases.get(expr.value.id)
            if module == "yaml" and expr.attr in YAML_LOADING:
                return f"yaml.{expr.attr}"
            if (module, expr.attr) in RENAMES:
                return f"{module}.{expr.attr}"
        if isinstance(expr, ast.Name) and expr.id in aliases and "." in aliases[expr.id]:
            module, _, attr = aliases[expr.id].partition(".")
            if (module == "yaml" and attr in YAML_LOADING) or (module, attr) in RENAMES:
                return aliases[expr.id]
        return None

    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, func: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            hit = offending(child) if isinstance(child, (ast.Attribute, ast.Name)) else None
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr in ("replace", "rename") and len(child.args) == 1 and not child.keywords
                    and offending(child.func) is None):
                hit = f".{child.func.attr}"  # Path.replace(target) / Path.rename(target)
            if hit:
                found.append((func, hit, child.lineno))
            visit(child, name)

    visit(tree, "<module>")
    return found


def scan(package_dir: Path) -> dict[tuple[str, str, str], list[int]]:
    out: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent)
        if rel.parts[:2] == (package_dir.name, "io"):
            continue
        for func, name, line in _calls(path):
            out.setdefault((rel.as_posix(), func, name), []).append(line)
    return out


def test_yaml_loads_and_renames_only_in_perfscout_io() -> None:
    found = scan(PACKAGE_DIR)
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    shown = "\n".join(f"  {f}:{lines[0]} in {fn}(): {name}" for (f, fn, name), lines in sorted(new.items()))
    assert not new, ("load YAML with perfscout.io (load_yaml_file, load_yaml, load_package_yaml) and write "
                     "files with perfscout.io (write_atomic, atomic_path), not a copy:\n" + shown)
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"gone, strike them from ALLOWED: {stale}"


def test_the_scan_finds_each_form(tmp_path: Path) -> None:
    pkg = tmp_path / "perfscout"
    (pkg / "io").mkdir(parents=True)
    (pkg / "io" / "atomic.py").write_text("import os\ndef w(a, b):\n    os.replace(a, b)\n")  # the one place
    (pkg / "a.py").write_text(
        "import yaml as y\nimport os\nfrom shutil import move\nfrom yaml import safe_load as sl\n"
        "def f(p, t, s):\n"
        "    y.safe_load(s)\n    y.load(s, Loader=y.CSafeLoader)\n    sl(s)\n"
        "    os.replace(p, t)\n    move(p, t)\n    p.replace(t)\n"
        "    s.replace('a', 'b')\n    y.safe_dump({})\n    y.Node\n")
    assert scan(pkg) == {  # s.replace('a', 'b'), safe_dump and yaml.Node are not loads or renames
        ("perfscout/a.py", "f", "yaml.safe_load"): [6, 8], ("perfscout/a.py", "f", "yaml.load"): [7],
        ("perfscout/a.py", "f", "yaml.CSafeLoader"): [7], ("perfscout/a.py", "f", "os.replace"): [9],
        ("perfscout/a.py", "f", "shutil.move"): [10], ("perfscout/a.py", "f", ".replace"): [11],
    }


def test_the_package_exports_what_it_lists() -> None:
    assert sorted(pio.__all__) == sorted(pio._EXPORTS)
    for name in pio.__all__:
        assert getattr(pio, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pio.nope  # noqa: B018 - the lookup is the test


def test_io_stands_on_errors_alone() -> None:
    """The bottom layer: every layer may call perfscout.io, so it calls nothing of theirs."""
    from tests.unit.test_layering import imports_of

    targets = {imp.target for p in sorted((PACKAGE_DIR / "io").glob("*.py")) for imp in imports_of(p, PACKAGE_DIR)}
    assert targets - {"perfscout.io.atomic", "perfscout.io.input_files", "perfscout.io.yaml_safe"} == {"perfscout.errors"}
