"""The parser's modules (perfscout/graph/understand/) share only public names: a name one module
imports from another never starts with an underscore (they imported 78 of each other's private
names, so that no module could change a helper without reading all the others). Private names
stay inside their module; what is shared is public and said so."""

from __future__ import annotations

import ast
from pathlib import Path

import perfscout.graph.understand as understand

PACKAGE = Path(understand.__file__).parent


def _imports_of_private_names() -> list[str]:
    found = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("perfscout.graph.understand"):
                found += [f"{path.name}: {a.name} from {node.module}" for a in node.names if a.name.startswith("_")]
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Name) and base.id in {p.stem for p in PACKAGE.glob("*.py")}:
                    found.append(f"{path.name}: {base.id}.{node.attr}")
    return found


def test_no_module_of_the_parser_imports_another_ones_private_names():
    assert _imports_of_private_names() == []


def test_the_check_sees_a_private_import(tmp_path, monkeypatch):
    # the check itself can fail: a module that takes a private name is found
    (tmp_path / "a.py").write_text("from perfscout.graph.understand.text import _hidden\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["PACKAGE"]), "PACKAGE", tmp_path)
    assert _imports_of_private_names() == ["a.py: _hidden from perfscout.graph.understand.text"]
