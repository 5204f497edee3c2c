"""Tidy rules over magnetar's own source: each concern is spelled in the one place that owns it.

Each rule is a test that parses the source (no imports, no broker) and names every offending line. Rules:

- wire error codes are spelled only in ``protocol/server_errors.py`` (the one registry): no module reads a
  ``ServerError`` member off the generated protobuf module, and no error class sets ``server_error`` to a
  bare number.
- metadata keys under ``/admin/`` are spelled only in ``magnetar/resources/`` (the admin API's URL paths,
  ``/admin/v2/...`` and ``/admin/v3/...``, are not keys).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import magnetar
from magnetar.protocol.server_errors import ServerErrorCode

ROOT = Path(magnetar.__file__).parent


@functools.cache
def _modules() -> dict[str, ast.Module]:
    """Every magnetar module but the generated protobuf code, parsed once: repo-relative path -> tree."""
    trees = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.name.endswith("_pb2.py"):
            continue
        trees[str(path.relative_to(ROOT.parent))] = ast.parse(path.read_text(), filename=str(path))
    return trees


def _nodes(*, outside: tuple[str, ...] = ()) -> Iterator[tuple[str, ast.AST]]:
    """Every AST node of every module whose path does not start with one of ``outside``."""
    for name, tree in _modules().items():
        if not name.startswith(outside):
            yield from ((name, node) for node in ast.walk(tree))


def _where(name: str, node: ast.AST) -> str:
    return f"{name}:{getattr(node, 'lineno', '?')}"


def test_the_rules_see_the_source() -> None:
    assert len(_modules()) > 200 and "magnetar/protocol/server_errors.py" in _modules()


def test_wire_error_codes_are_spelled_only_in_the_registry() -> None:
    codes = {code.name for code in ServerErrorCode}
    offenders = []
    for name, node in _nodes(outside=("magnetar/protocol/server_errors.py",)):
        if isinstance(node, ast.Attribute) and node.attr in codes:
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "pb") or (
                    isinstance(base, ast.Attribute) and base.attr == "pb"):
                offenders.append(f"{_where(name, node)} pb.{node.attr}")
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "server_error" for t in targets) and isinstance(
                    node.value, ast.Constant):
                offenders.append(f"{_where(name, node)} server_error = {node.value.value!r}")
    assert offenders == [], "use magnetar.protocol.server_errors.ServerErrorCode:\n" + "\n".join(offenders)


_ADMIN_KEY = re.compile(r"^/admin/(?!v\d+(/|$))\w")


def test_admin_metadata_keys_are_spelled_only_in_resources() -> None:
    offenders = [
        f"{_where(name, node)} {node.value!r}"
        for name, node in _nodes(outside=("magnetar/resources/",))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _ADMIN_KEY.match(node.value)
    ]
    assert offenders == [], "spell metadata keys in magnetar.resources:\n" + "\n".join(offenders)
