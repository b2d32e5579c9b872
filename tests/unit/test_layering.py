"""Dependencies point one way: state <- codecs/datasets <- analysis <- tools <- sweep <- graph <- cli.

This test reads perfscout's own imports (``ast`` over ``perfscout/**/*.py``: module-level
imports, imports inside functions, ``TYPE_CHECKING`` blocks, constant arguments of
``importlib.import_module`` and ``"perfscout.module:Name"`` import paths such as the codec
registry's) and fails on

- a top-level package or module that has no layer (a new one must be placed here),
- an import from a lower layer into a higher one,
- a cycle between top-level units (two units of one layer that import each other, say),
- a cycle between modules that is not in the documented list below.

Where the small top-level modules sit, and why:

- ``errors.py``, ``home.py`` and ``io/`` are at the bottom with ``state/``: they import nothing of
  perfscout (``io/`` only ``errors``), and every layer raises perfscout's errors, finds its home
  directory, writes its files atomically and reads the files and YAML a user names through them.
- ``platform_profiles/`` (the spec table of known hardware and saved snapshots) sits with
  ``codecs/`` and ``datasets/``: like them it is a source of data that loads into
  ``state`` records (``PlatformProfile``), needs ``errors``/``home``, and is read by tools.
- ``sweep/`` (the sweep engine) sits above ``tools/`` and below ``graph/``: its task processes
  call ``tools.evaluate`` and its run directory keeps ``tools.snapshot``'s record, while the
  graph plans sweeps from specs. The results store it writes is ``tools/results_store.py``,
  one layer down, because tools read stored results too (export, regress).
- ``agent.py``, ``api_sweep.py``, ``__init__.py`` and ``__main__.py`` are the public face,
  on the top floor with ``cli/``: they may import anything; nothing else imports them
  (``perfscout.sweep.api`` is what the graph and the CLI call; ``api_sweep`` re-exports it).
- ``viewer/`` (``perfscout serve``'s web app) is on the top floor too: it continues runs through
  ``agent.py`` as the CLI does; ``cli/serve_cmd.py`` imports it, it imports nothing of ``cli/``.

Imports built at run time from non-constant names (``import_module(f"...{name}")``) are
not followed; they all stay inside one package (CLI commands, diagnosis rules, the sweep
package's lazy names).

Run it with ``python -m pytest tests/unit/test_layering.py -q``; on a failure it prints
every offending import with its file and line.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "perfscout"

#: Layer of each top-level unit of the package (a unit = the first name under perfscout).
LAYERS: dict[str, int] = {
    "state": 0, "errors": 0, "home": 0, "io": 0,
    "codecs": 1, "datasets": 1, "platform_profiles": 1,
    "analysis": 2,
    "tools": 3,
    "sweep": 4,
    "graph": 5,
    "cli": 6, "agent": 6, "api_sweep": 6, "__init__": 6, "__main__": 6, "viewer": 6,
}

#: Upward imports still in the tree: (importing file, imported module) -> why it is still there.
#: Shrink it; an entry whose import is gone fails the test, so a fix must also strike it here.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {}

#: Cycles between modules that exist today, each in files other engineers are editing now.
#: Every entry names the modules of one cycle (a strongly connected set). A NEW cycle fails; an
#: entry that no longer is a cycle fails too (strike it), so the list can only shrink.
KNOWN_MODULE_CYCLES: dict[frozenset[str], str] = {}


@dataclass(frozen=True)
class Import:
    importer: str  # module that imports, e.g. perfscout.tools.perf_stat
    target: str  # module imported, e.g. perfscout.state.perf_events
    file: str  # importer's path relative to the package's parent
    line: int


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str, package_dir: Path) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    base = package_dir / rel
    return name == package_dir.name or base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve_from(node: ast.ImportFrom, importer: str, is_package: bool) -> str | None:
    if not node.level:
        return node.module
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")  # "package.module:Class"


def imports_of(path: Path, package_dir: Path) -> list[Import]:
    """Every import of the package's own modules that ``path`` makes, wherever it stands."""
    pkg = package_dir.name
    importer = module_name(path, package_dir)
    is_package = path.name == "__init__.py"
    rel = str(path.relative_to(package_dir.parent))
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve_from(node, importer, is_package)
            if mod is None:
                continue
            # `from perfscout import datasets` imports the module perfscout.datasets
            subs = [f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}", package_dir)]
            found += [(s, node.lineno) for s in subs] or [(mod, node.lineno)]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                found.append((node.args[0].value, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _IMPORT_PATH.match(node.value):
            found.append((node.value.partition(":")[0], node.lineno))
    out = []
    for target, line in found:
        if target != pkg and not target.startswith(pkg + "."):
            continue
        # the longest prefix that is a module of the tree (`perfscout.x.y.NAME` -> perfscout.x.y)
        while not _is_module(target, package_dir) and "." in target:
            target = target.rsplit(".", 1)[0]
        if target != importer:
            out.append(Import(importer, target, rel, line))
    return out


def import_graph(package_dir: Path) -> list[Import]:
    return [imp for path in sorted(package_dir.rglob("*.py")) for imp in imports_of(path, package_dir)]


def unit_of(module: str) -> str:
    """The top-level unit of a module: perfscout.tools.results_store -> tools; perfscout -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward_imports(edges: list[Import], layers: dict[str, int]) -> list[Import]:
    return [e for e in edges if layers[unit_of(e.target)] > layers[unit_of(e.importer)]]


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components with more than one member (the cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def unit_cycles(edges: list[Import]) -> list[set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        a, b = unit_of(e.importer), unit_of(e.target)
        if a != b:
            graph[a].add(b)
    return strongly_connected(graph)


def module_cycles(edges: list[Import]) -> list[set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for e in edges:
        graph[e.importer].add(e.target)
    return strongly_connected(graph)


def _show(edges: list[Import]) -> str:
    return "\n".join(f"  {e.file}:{e.line}: imports {e.target}" for e in edges)


# ----------------------------------------------------------------------------- the tree itself


@pytest.fixture(scope="module")
def edges() -> list[Import]:
    assert PACKAGE_DIR.is_dir(), PACKAGE_DIR
    return import_graph(PACKAGE_DIR)


def test_every_top_level_unit_has_a_layer(edges: list[Import]) -> None:
    units = {unit_of(module_name(p, PACKAGE_DIR)) for p in PACKAGE_DIR.rglob("*.py")}
    missing = sorted(units - set(LAYERS))
    assert not missing, f"place these in LAYERS (and say why in the docstring): {missing}"


def test_no_import_points_up_the_layers(edges: list[Import]) -> None:
    up = upward_imports(edges, LAYERS)
    new = [e for e in up if (e.file, e.target) not in ALLOWED_UPWARD]
    assert not new, ("imports against state <- codecs/datasets <- analysis <- tools <- graph <- cli "
                     "(move the shared piece down, or pass the data in):\n" + _show(new))
    stale = sorted(set(ALLOWED_UPWARD) - {(e.file, e.target) for e in up})
    assert not stale, f"fixed, strike them from ALLOWED_UPWARD: {stale}"


def test_no_cycle_between_top_level_units(edges: list[Import]) -> None:
    # An ALLOWED_UPWARD import closes a cycle with the downward imports it points against;
    # that is the one documented violation, not a second one. Every other edge counts.
    edges = [e for e in edges if (e.file, e.target) not in ALLOWED_UPWARD]
    cycles = unit_cycles(edges)
    detail = [e for e in edges if any({unit_of(e.importer), unit_of(e.target)} <= c for c in cycles)
              and unit_of(e.importer) != unit_of(e.target)]
    assert not cycles, f"units that import each other: {cycles}\n" + _show(detail)


def test_no_new_cycle_between_modules(edges: list[Import]) -> None:
    cycles = {frozenset(c) for c in module_cycles(edges)}
    new = cycles - set(KNOWN_MODULE_CYCLES)
    detail = [e for e in edges if any({e.importer, e.target} <= c for c in new)]
    assert not new, f"modules that import each other: {[sorted(c) for c in new]}\n" + _show(detail)
    gone = [sorted(c) for c in set(KNOWN_MODULE_CYCLES) - cycles]
    assert not gone, f"no longer a cycle (or changed shape), update KNOWN_MODULE_CYCLES: {gone}"


def test_the_scan_sees_the_imports_that_carry_the_layers(edges: list[Import]) -> None:
    """Known edges of today's tree: if the scanner stopped reading an import kind, this says so."""
    seen = {(e.importer, e.target) for e in edges}
    assert ("perfscout.tools.perf_stat", "perfscout.state.perf_events") in seen  # module level
    assert ("perfscout.tools.perf_stat", "perfscout.analysis.diagnosis.cpu_context") in seen  # in a function
    assert ("perfscout.codecs.registry", "perfscout.codecs.sz3") in seen  # "module:Class" import path
    assert ("perfscout.graph.planner", "perfscout.datasets") in seen  # import_module("...")
    assert ("perfscout.sweep.worker", "perfscout.tools.evaluate") in seen  # the sweep stands on tools


# ----------------------------------------------------------------------------- the checker itself


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "perfscout"
    for rel, text in {"__init__.py": "", **files}.items():
        p = pkg / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        for parent in p.relative_to(pkg).parents:
            (pkg / parent / "__init__.py").touch()
        p.write_text(text)
    return pkg


def test_checker_finds_an_upward_import_in_any_form(tmp_path: Path) -> None:
    pkg = _tree(tmp_path, {
        "state/a.py": "def f():\n    from perfscout.tools import b\n",  # inside a function
        "codecs/c.py": "from ..analysis.d import X\n",  # relative
        "datasets/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import perfscout.graph.g\n",
        "analysis/d.py": "import importlib\nm = importlib.import_module('perfscout.cli.h')\nX = 1\n",
        "tools/b.py": "PLUGIN = 'perfscout.graph.g:Thing'\nfrom perfscout import state\n",  # down: fine
        "graph/g.py": "", "cli/h.py": "",
    })
    up = {(e.importer, e.target) for e in upward_imports(import_graph(pkg), LAYERS)}
    assert up == {("perfscout.state.a", "perfscout.tools.b"), ("perfscout.codecs.c", "perfscout.analysis.d"),
                  ("perfscout.datasets.e", "perfscout.graph.g"), ("perfscout.analysis.d", "perfscout.cli.h"),
                  ("perfscout.tools.b", "perfscout.graph.g")}


def test_checker_finds_cycles_between_units_and_modules(tmp_path: Path) -> None:
    pkg = _tree(tmp_path, {
        "codecs/x.py": "from perfscout.datasets import y\n",
        "datasets/y.py": "def f():\n    from perfscout.codecs.x import g\n",
        "tools/p.py": "import perfscout.tools.q\n", "tools/q.py": "from . import p\n",
    })
    edges = import_graph(pkg)
    assert unit_cycles(edges) == [{"codecs", "datasets"}]
    assert sorted(map(sorted, module_cycles(edges))) == [["perfscout.codecs.x", "perfscout.datasets.y"],
                                                          ["perfscout.tools.p", "perfscout.tools.q"]]
    assert not upward_imports(edges, LAYERS)  # one layer: no upward import, still a cycle


#: Where the agent framework (LangGraph, LangChain) may be imported: the graph and what sits on
#: it, plus the one chat-model factory in state/ that both the graph and the diagnosis use.
FRAMEWORK_UNITS = {"graph", "cli", "viewer", "agent", "api_sweep", "__init__", "__main__"}
FRAMEWORK_MODULES = {"perfscout.state.llm_endpoint"}
_FRAMEWORK = ("langgraph", "langchain", "langchain_core", "langchain_openai", "langsmith")


def framework_imports(package_dir: Path) -> list[tuple[str, str, int]]:
    """(module, framework package, line) for every import of the agent framework."""
    out = []
    for path in sorted(package_dir.rglob("*.py")):
        module = module_name(path, package_dir)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            out += [(module, n, node.lineno) for n in names if n.split(".")[0] in _FRAMEWORK]
    return out


def test_the_agent_framework_is_imported_only_by_the_graph_and_above() -> None:
    bad = [f"{m}:{line} imports {n}" for m, n, line in framework_imports(PACKAGE_DIR)
           if unit_of(m) not in FRAMEWORK_UNITS and m not in FRAMEWORK_MODULES]
    assert not bad, "LangGraph/LangChain below graph/:\n" + "\n".join(bad)


def test_framework_scan_sees_a_planted_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"tools/x.py": "def f():\n    from langgraph.prebuilt import ToolRuntime\n",
                            "graph/y.py": "import langchain_core.tools\n"})
    found = framework_imports(root)
    assert ("perfscout.tools.x", "langgraph.prebuilt", 2) in found
    assert ("perfscout.graph.y", "langchain_core.tools", 1) in found
