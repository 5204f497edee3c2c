"""The generated reference pages (scripts/docs_hooks.py) cover what the code has: every configuration key, every
command and flag of the ``magnetar`` parser."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from magnetar.config import known_keys

HOOKS = Path(__file__).resolve().parents[2] / "scripts" / "docs_hooks.py"


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", HOOKS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_reference_names_every_key() -> None:
    text = hooks().configuration_markdown()
    assert [key for key in known_keys() if f"`{key}`" not in text] == []


def test_the_command_reference_has_every_verb_and_flag() -> None:
    text = hooks().cli_markdown()
    for heading in ("## `magnetar standalone`", "### `magnetar admin topics`", "#### `magnetar admin topics stats`",
                    "### `magnetar perf produce`", "### `magnetar tokens create`", "### `magnetar spark export`"):
        assert heading in text, heading
    assert "| `--set` |" in text and "| `-w`, `--wait-complete` |" in text
    assert "(also: `list`)" in text  # aliases folded into their verb


def test_markers_are_replaced_and_other_pages_left_alone() -> None:
    module = hooks()
    assert module.on_page_markdown("intro\n\n<!-- generated: cli -->\n", None, None, None).startswith("intro\n\n## ")
    assert module.on_page_markdown("plain page\n", None, None, None) == "plain page\n"
