"""YAML for documents a stranger may have written: PyYAML's safe loader, with limits.

``yaml.safe_load`` builds no objects but it trusts the document's shape. An alias bomb
(``b: [*a, *a, ...]`` nine levels deep, about 500 bytes) loads as shared references and
then expands exponentially in whatever walks it next (validation, JSON, a checkpoint),
and a document nested a few thousand levels deep overflows PyYAML's recursive composer
with a ``RecursionError``. Both are refused here while the node graph is composed, before
any Python object exists: the text size, the nesting depth, the number of aliases and the
number of nodes the document would have once every alias is expanded are all capped.
Every refusal is a :class:`YAMLLimitError` naming the source and line.

Every YAML perfscout reads goes through this module (``tests/unit/test_io_only.py`` fails on a
``yaml.safe_load`` anywhere else): :func:`load_yaml_file` for a file a user named (read by
:func:`perfscout.io.read_input_text`, then loaded with limits), :func:`load_yaml` /
:func:`compose_yaml` for text, and :func:`load_package_yaml` for the files that ship inside
perfscout (the parser's vocabulary, the hardware spec table, the dataset registry), which are
ours and are read on every parse, so they take libyaml's fast safe loader instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from perfscout.errors import InputError
from perfscout.io.input_files import read_input_text


@dataclass(frozen=True)
class YAMLLimits:
    #: Characters of YAML text (a sweep spec is a few hundred lines at most).
    max_chars: int = 1_000_000
    #: Nested mappings/sequences (a spec needs about 6).
    max_depth: int = 64
    #: Alias uses (``*name``); anchors are fine, a few aliases are fine.
    max_aliases: int = 1_000
    #: Nodes after expanding every alias: what a consumer would really walk.
    max_expanded_nodes: int = 200_000


DEFAULT_LIMITS = YAMLLimits()


class YAMLLimitError(InputError):
    """A YAML document beyond one of the loader's limits, or not YAML at all."""


def _where(source: str, node_or_mark: Any) -> str:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return f"{source}:{mark.line + 1}" if mark is not None and hasattr(mark, "line") else source


def _limited_loader(source: str, limits: YAMLLimits) -> type[yaml.SafeLoader]:
    class LimitedLoader(yaml.SafeLoader):
        """Counts depth and aliases as the composer recurses (before it can overflow)."""

        _depth = 0
        _aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: ANN401 - PyYAML's signature
            if self.check_event(yaml.AliasEvent):
                self._aliases += 1
                if self._aliases > limits.max_aliases:
                    raise YAMLLimitError(f"{_where(source, self.peek_event())}: more than {limits.max_aliases} "
                                         "YAML aliases; refused (an alias bomb expands exponentially)")
                return super().compose_node(parent, index)
            self._depth += 1
            try:
                if self._depth > limits.max_depth:
                    raise YAMLLimitError(f"{_where(source, self.peek_event())}: YAML nested more than "
                                         f"{limits.max_depth} levels deep; refused")
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return LimitedLoader


def _expanded_size(root: yaml.Node, source: str, limits: YAMLLimits) -> int:
    """Nodes of the document with every alias expanded, without expanding anything: each
    node's size is computed once (memoised by identity), so a bomb costs linear time."""
    sizes: dict[int, int] = {}
    # Iterative post-order walk: depth is already capped, but no recursion is needed at all.
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
            continue
        total = 1 + sum(sizes[id(c)] for c in children)
        if total > limits.max_expanded_nodes:
            raise YAMLLimitError(f"{_where(source, node)}: the YAML document expands to more than "
                                 f"{limits.max_expanded_nodes} nodes once its aliases are resolved; refused "
                                 "(an alias bomb)")
        sizes[id(node)] = total
    return sizes[id(root)]


def compose_yaml(text: str, source: str = "<yaml>", limits: YAMLLimits = DEFAULT_LIMITS) -> yaml.Node | None:
    """The node graph of one YAML document (marks give line numbers), within ``limits``."""
    if len(text) > limits.max_chars:
        raise YAMLLimitError(f"{source}: {len(text)} characters of YAML; the limit is {limits.max_chars}")
    loader = _limited_loader(source, limits)(text)
    try:
        root = loader.get_single_node()
    except YAMLLimitError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise YAMLLimitError(f"{where}: YAML syntax error: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise YAMLLimitError(f"{source}: YAML error: {exc}") from None
    except RecursionError:  # a deep structure PyYAML's parser met before our depth count did
        raise YAMLLimitError(f"{source}: YAML nested too deeply; refused") from None
    finally:
        loader.dispose()
    if root is not None:
        _expanded_size(root, source, limits)
    return root


def construct_yaml(root: yaml.Node | None) -> Any:
    """Python values (safe types only) of a node graph from :func:`compose_yaml`."""
    if root is None:
        return None
    constructor = yaml.SafeLoader("")
    try:
        return constructor.construct_document(root)
    except yaml.YAMLError as exc:
        raise YAMLLimitError(f"YAML error: {exc}") from None
    finally:
        constructor.dispose()


def load_yaml(text: str, source: str = "<yaml>", limits: YAMLLimits = DEFAULT_LIMITS) -> Any:
    """``yaml.safe_load`` with limits: the drop-in for any YAML a user or a model hands us."""
    return construct_yaml(compose_yaml(text, source, limits))


def load_yaml_file(path: str | os.PathLike[str], what: str, limits: YAMLLimits = DEFAULT_LIMITS) -> Any:
    """The YAML document in the file a user named: a regular file of document size, UTF-8
    (:func:`~perfscout.io.input_files.read_input_text`), loaded within ``limits``; InputError
    (``what`` names the file's use: "bench spec", "cluster config") otherwise."""
    return load_yaml(read_input_text(path, what), str(path), limits)


def load_package_yaml(package: str, name: str) -> Any:
    """A YAML file shipped inside perfscout (``package``'s resource ``name``). Only package
    resources can be named, never a user's path: they are our own files, so libyaml's safe
    loader (10x faster: the vocabulary loads in 9 ms instead of 90) reads them without limits."""
    source = f"{package}/{name}"
    try:
        text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    except (OSError, ModuleNotFoundError) as exc:
        raise InputError(f"cannot read {source}: {exc}") from None
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise YAMLLimitError(f"{source}: YAML error: {exc}") from None
