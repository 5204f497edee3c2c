"""mkdocs hooks: the generated parts of the site, made from the code at build time so they cannot go stale.

A page asks for one with a marker line; the marker is replaced when the site is built:
``<!-- generated: configuration -->`` (every configuration key, from ``magnetar/config.py``'s key table and
``magnetar/config_reference.py``) and ``<!-- generated: cli -->`` (every ``magnetar`` command, from its argparse
parser). ``tests/unit/test_docs_generated.py`` runs both generators too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def configuration_markdown() -> str:
    from magnetar.config_reference import reference_markdown

    return reference_markdown()


def _root_parser() -> argparse.ArgumentParser:
    import importlib

    parser: argparse.ArgumentParser = importlib.import_module("magnetar.cli.main")._parser()
    return parser


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, list[str], str, argparse.ArgumentParser]]:
    """(name, aliases, help, parser) of each subcommand, aliases folded into their command."""
    found: list[tuple[str, list[str], str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        by_parser: dict[int, int] = {}
        for name, child in action.choices.items():
            if id(child) in by_parser:
                found[by_parser[id(child)]][1].append(name)
                continue
            by_parser[id(child)] = len(found)
            found.append((name, [], helps.get(name, ""), child))
    return found


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction | argparse._VersionAction):
            continue
        name = ", ".join(f"`{flag}`" for flag in action.option_strings) or f"`{(action.metavar or action.dest)}`"
        text = action.help or ""
        if "%(" in text:
            text = text % {**vars(action), "prog": parser.prog}
        if action.choices:
            text += f" (one of: {', '.join(str(c) for c in action.choices)})"
        default = action.default
        unset = default in (None, False, [], "", argparse.SUPPRESS) or not action.option_strings
        shown = "" if unset else f"`{default}`"
        rows.append(f"| {name} | {_cell(text)} | {_cell(shown)} |")
    return rows


def cli_markdown() -> str:
    """Every command of ``magnetar``, depth first: its help, then a table of its arguments."""
    out: list[str] = []

    def walk(parser: argparse.ArgumentParser, words: list[str], help_text: str, aliases: list[str]) -> None:
        level = min(len(words), 4)
        title = " ".join(words)
        out.append(f"{'#' * level} `{title}`" + (f" (also: {', '.join(f'`{a}`' for a in aliases)})" if aliases else ""))
        out.append("")
        if help_text or parser.description:
            out.extend([_cell(help_text or parser.description or ""), ""])
        rows = _argument_rows(parser)
        if rows:
            out.extend(["| argument | meaning | default |", "|---|---|---|", *rows, ""])
        for name, more, text, child in _subcommands(parser):
            walk(child, [*words, name], text, more)

    root = _root_parser()
    for name, more, text, child in _subcommands(root):
        walk(child, ["magnetar", name], text, more)
    return "\n".join(out)


GENERATED: dict[str, Callable[[], str]] = {
    "<!-- generated: configuration -->": configuration_markdown,
    "<!-- generated: cli -->": cli_markdown,
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, make in GENERATED.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
