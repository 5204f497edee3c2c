"""Tidy rules over magnetar's structure (issue 28, "one owner per concern"), beside ``test_tidy.py``'s:

- only ``broker/topic/`` assigns a persistent topic's attributes: features plug into a topic through its
  ports (``topic.extensions``) and methods, never by setting ``topic.x = ...`` or filling ``topic.x[k]``
  (a topic is recognised by the names code gives it: ``topic``, ``loaded``, ``reloaded``, ``self.topic``,
  ``self._topic``, or a name ending in ``_topic``; ``broker/nonpersistent/`` has its own topic class and
  ``broker/compaction/``'s ``topic`` is its own compacted view);
- every lifecycle's table of legal transitions is a ``core.lifecycle.Transitions``: no module keeps a dict
  from enum members to sets of enum members of its own;
- no module is over 600 lines (the style's hard cap; aim under 500).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from tests.unit.test_tidy import ROOT, _modules, _nodes, _where

LINES_MAX = 600
TOPIC_NAMES = frozenset({"topic", "loaded", "reloaded"})
TOPIC_OWNERS = ("magnetar/broker/topic/", "magnetar/broker/nonpersistent/", "magnetar/broker/compaction/")
TOPIC_USERS = ("magnetar/broker/", "magnetar/server/", "magnetar/app/")


def _is_topic(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in TOPIC_NAMES or node.id.endswith("_topic")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr in ("topic", "_topic")
    return False


def _assigned(node: ast.AST) -> Iterator[ast.expr]:
    if isinstance(node, ast.Assign):
        yield from node.targets
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        yield node.target
    elif isinstance(node, ast.Delete):
        yield from node.targets


def _topic_attribute(target: ast.expr) -> str | None:
    """``topic.x`` or ``topic.x[...]`` (any depth of subscripts) as "topic.x"; None for anything else."""
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and _is_topic(target.value):
        return f"{ast.unparse(target.value)}.{target.attr}"
    return None


def test_only_the_topic_package_assigns_a_topics_attributes() -> None:
    offenders = []
    users = {name: tree for name, tree in _modules().items()
             if name.startswith(TOPIC_USERS) and not name.startswith(TOPIC_OWNERS)}
    for name, node in ((n, node) for n, tree in users.items() for node in ast.walk(tree)):
        if not isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            continue
        for target in _assigned(node):
            found = _topic_attribute(target)
            if found is not None:
                offenders.append(f"{_where(name, node)} {found}")
    assert offenders == [], "plug into the topic's ports or call its methods:\n" + "\n".join(offenders)


def _enum_members(node: ast.expr) -> bool:
    """``State.X`` (an attribute of a capitalised name): how a module spells its enum's members."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id[:1].isupper()


def _set_of_members(node: ast.expr) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set"):
        return not node.args or _set_of_members(node.args[0])
    if isinstance(node, ast.Set):
        return all(_enum_members(e) for e in node.elts)
    return False


def test_every_transition_table_is_built_on_core_lifecycle() -> None:
    built: set[int] = set()
    tables: list[tuple[str, ast.Dict]] = []
    for name, node in _nodes(outside=("magnetar/core/lifecycle.py",)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Transitions":
            built.update(id(arg) for arg in node.args)
        elif isinstance(node, ast.Dict) and node.keys and all(k is not None and _enum_members(k) for k in node.keys):
            tables.append((name, node))
    offenders = [_where(name, node) for name, node in tables
                 if id(node) not in built and all(_set_of_members(v) for v in node.values)]
    assert offenders == [], "build the table with magnetar.core.lifecycle.Transitions:\n" + "\n".join(offenders)


def test_no_module_is_over_the_line_cap() -> None:
    sizes = {name: len((ROOT.parent / name).read_text().splitlines()) for name in _modules()}
    over = sorted(f"{name}: {lines}" for name, lines in sizes.items() if lines > LINES_MAX)
    assert over == [], f"split these modules (at most {LINES_MAX} lines each):\n" + "\n".join(over)
