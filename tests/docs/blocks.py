"""The code blocks of the README and the docs pages, and the markers that say how each one is tested.

Every fenced block carries a marker, an HTML comment on the line before it (blank lines between are allowed):

    <!-- test: broker -->
    ```python
    ...
    ```

The marker's words are the block's needs (see ``NEEDS``) or one of the kinds that are not run as code
(``file NAME``, ``output``, ``skip REASON``), then optional ``key=value`` words (``timeout=S``; for ``broker``,
anything else is a broker setting passed as ``--set key=value``). Indented code blocks are refused (they cannot
carry a marker), and so are unmarked fences, unknown words and markers that precede no fence.
``docs/writing-docs.md`` is the contributor's description of all this; this module is the one that decides.
Pure: reads text, starts nothing.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

REPO = Path(__file__).resolve().parents[2]

SHELL_LANGS = frozenset({"bash", "sh", "shell"})
PYTHON_LANGS = frozenset({"python", "py", "python3"})

#: needs a block may name; the value says whether the harness can provide it today. A need that is declared but
#: not wired yet (False) makes its blocks reported as not run (the page's test is skipped with the list), never
#: silently passed; wiring it is adding a provider in ``page_run.py`` and flipping it here.
NEEDS: dict[str, bool] = {
    "none": True,  # nothing: library code, a CLI that talks to no server
    "broker": True,  # the page's standalone broker at the documented ports 6650 / 8080 (started on first need)
    "starts": True,  # the block itself starts servers in the background; the harness waits for their ports
    "moto": True,  # an S3 API (moto_server) at the documented port 5000
    "zookeeper": True,  # a ZooKeeper server at the documented port 2181 (tests/zk_server.py)
    "cluster": False,  # several brokers sharing one metadata store (the cluster work wires it)
}
#: kinds that are not executed as code
NOT_RUN = frozenset({"file", "output", "skip"})

MARKER = re.compile(r"^\s*<!--\s*test:(?P<body>.*?)-->\s*$")
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 600.0


class MarkerError(Exception):
    """A block the harness cannot run as marked: the message names the page and line."""


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    kind: str  # "shell", "python", "file", "output" or "skip"
    needs: frozenset[str] = frozenset()
    arg: str = ""  # the file name (file) or the reason (skip)
    settings: tuple[tuple[str, str], ...] = ()  # broker settings
    timeout_s: float = DEFAULT_TIMEOUT_S
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")


def pages() -> list[Path]:
    """The README and every page under docs/ (generated pages included: their stubs are pages too)."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def rel(path: Path) -> str:
    return path.resolve().relative_to(REPO).as_posix()


def parse_page(path: Path) -> list[Block]:
    """The page's blocks in order; raises MarkerError for the first block that cannot be run as marked."""
    text = path.read_text(encoding="utf-8")
    return parse_text(text, rel(path) if path.is_absolute() else str(path))


def parse_text(text: str, page: str) -> list[Block]:
    lines = text.splitlines()
    tokens = MarkdownIt("commonmark").parse(text)
    blocks: list[Block] = []
    used_markers: set[int] = set()
    for token in tokens:
        if token.map is None:
            continue
        start = token.map[0]
        if token.type == "code_block":
            raise MarkerError(f"{page}:{start + 1}: an indented code block; write it as a fenced block with a "
                              f"<!-- test: ... --> marker (docs/writing-docs.md)")
        if token.type != "fence":
            continue
        marker_line = start - 1
        while marker_line >= 0 and not lines[marker_line].strip():
            marker_line -= 1
        match = MARKER.match(lines[marker_line]) if marker_line >= 0 else None
        if match is None:
            raise MarkerError(f"{page}:{start + 1}: a code block without a <!-- test: ... --> marker on the line "
                              f"before it (docs/writing-docs.md says which)")
        used_markers.add(marker_line)
        lang = (token.info.split() or [""])[0].lower()
        blocks.append(_block(page, start + 1, lang, token.content, match.group("body")))
    for number, line in enumerate(lines):
        if MARKER.match(line) and number not in used_markers and not _inside_fence(tokens, number):
            raise MarkerError(f"{page}:{number + 1}: a test marker that precedes no fenced code block")
    return blocks


def _inside_fence(tokens: list[Token], number: int) -> bool:
    return any(t.type == "fence" and t.map is not None and t.map[0] <= number < t.map[1] for t in tokens)


def _block(page: str, line: int, lang: str, text: str, body: str) -> Block:
    where = f"{page}:{line}"
    try:
        words = shlex.split(body)
    except ValueError as exc:
        raise MarkerError(f"{where}: the marker does not parse: {exc}") from exc
    if not words:
        raise MarkerError(f"{where}: an empty marker")
    head = words[0]
    if head in NOT_RUN:
        rest = words[1:]
        if head == "file":
            if len(rest) != 1 or "/" in rest[0] or rest[0].startswith("."):
                raise MarkerError(f"{where}: `file` takes one plain file name")
            return Block(page, line, lang, text, "file", arg=rest[0])
        if head == "skip":
            if not rest:
                raise MarkerError(f"{where}: `skip` needs a reason")
            return Block(page, line, lang, text, "skip", arg=" ".join(rest))
        if rest:
            raise MarkerError(f"{where}: `output` takes no words")
        return Block(page, line, lang, text, "output")
    if lang in SHELL_LANGS:
        kind = "shell"
    elif lang in PYTHON_LANGS:
        kind = "python"
    else:
        raise MarkerError(f"{where}: a `{lang or 'plain'}` block can only be `file NAME`, `output` or `skip REASON`"
                          f"; code to run is ```bash or ```python")
    needs: set[str] = set()
    options: dict[str, str] = {}
    settings: list[tuple[str, str]] = []
    for word in words:
        key, sep, value = word.partition("=")
        if sep:
            if key == "timeout":
                try:
                    timeout = float(value)
                except ValueError:
                    raise MarkerError(f"{where}: timeout must be seconds, got {value!r}") from None
                if not 0 < timeout <= MAX_TIMEOUT_S:
                    raise MarkerError(f"{where}: timeout must be within 0..{MAX_TIMEOUT_S:.0f} s")
                options["timeout"] = value
            else:
                settings.append((key, value))
            continue
        if word in NOT_RUN:
            raise MarkerError(f"{where}: `{word}` must be the marker's first word")
        if word not in NEEDS:
            raise MarkerError(f"{where}: unknown need {word!r} (known: {', '.join(sorted(NEEDS))})")
        needs.add(word)
    if not needs:
        raise MarkerError(f"{where}: name what the block needs (`none` if nothing)")
    if "none" in needs and len(needs) > 1:
        raise MarkerError(f"{where}: `none` cannot be combined with other needs")
    if settings and "broker" not in needs:
        raise MarkerError(f"{where}: broker settings ({settings[0][0]}=...) need `broker`")
    if "starts" in needs and kind != "shell":
        raise MarkerError(f"{where}: only a shell block can `start` servers")
    return Block(page, line, lang, text, kind, needs=frozenset(needs), settings=tuple(settings),
                 timeout_s=float(options.get("timeout", DEFAULT_TIMEOUT_S)), options=options)
