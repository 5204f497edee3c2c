"""Every code block of the README and the docs pages runs, against a real broker where it needs one.

One test per page that has blocks to run (its blocks in order, one broker and one python process for the page),
plus the checks that every block is marked and that the blocks not run are the listed few. The convention is in
``docs/writing-docs.md``; the parser in ``blocks.py``, the runner in ``page_run.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import MarkerError, pages, parse_page, rel
from tests.docs.page_run import PageRun

pytestmark = pytest.mark.integration
PAGE_TIMEOUT_S = 300.0  # pytest's default hang guard (pyproject.toml)

#: the blocks that are shown and never run, by page and the start of their first line, with the reason; keep it short
ALLOWED_SKIPS: dict[tuple[str, str], str] = {
    ("docs/publish-path.md", "git archive <before>"): "a benchmark of two source trees: many minutes of CPU",
}


def _runnable_pages() -> list[Path]:
    chosen = []
    for page in pages():
        try:
            blocks = parse_page(page)
        except MarkerError:
            chosen.append(page)  # its test reports the error
            continue
        if any(block.kind in ("shell", "python") for block in blocks):
            chosen.append(page)
    return chosen


def _page_params() -> list[object]:
    """One test per runnable page, its time limit the sum of its blocks' (a page of several slow blocks, a Spark
    cluster's, needs more than pytest's default hang guard)."""
    params = []
    for page in _runnable_pages():
        try:
            limit_s = sum(b.timeout_s for b in parse_page(page) if b.kind in ("shell", "python"))
        except MarkerError:
            limit_s = 0.0
        params.append(pytest.param(page, id=rel(page), marks=pytest.mark.timeout(max(PAGE_TIMEOUT_S, limit_s + 60))))
    return params


def test_every_block_is_marked() -> None:
    problems = []
    for page in pages():
        try:
            parse_page(page)
        except MarkerError as exc:
            problems.append(str(exc))
    assert not problems, "\n".join(problems)


def test_only_listed_blocks_are_skipped() -> None:
    skipped = {}
    for page in pages():
        try:
            blocks = parse_page(page)
        except MarkerError:
            continue  # reported by test_every_block_is_marked
        skipped.update({(block.page, block.first_line): block.arg for block in blocks if block.kind == "skip"})

    def listed(page: str, first: str) -> bool:
        return any(page == p and first.startswith(start) for p, start in ALLOWED_SKIPS)

    unlisted = sorted(key for key in skipped if not listed(*key))
    stale = sorted((p, start) for p, start in ALLOWED_SKIPS
                   if not any(p == page and first.startswith(start) for page, first in skipped))
    assert not unlisted, f"blocks marked skip that ALLOWED_SKIPS does not list (make them run instead): {unlisted}"
    assert not stale, f"ALLOWED_SKIPS lists blocks that are no longer skipped: {stale}"


@pytest.mark.parametrize("page", _page_params())
def test_page_code_blocks(page: Path, tmp_path: Path) -> None:
    blocks = parse_page(page)
    run = PageRun(rel(page), tmp_path / "page")
    try:
        run.run(blocks)
    finally:
        run.close()
        print("\n".join(f"{where}: {seconds:.1f} s" for where, seconds in run.timings))  # shown with -rP
    assert run.ran > 0
    waiting = [f"{block.where}: {why}" for block, why in run.not_run if not why.startswith("skip:")]
    if waiting:
        pytest.skip(f"ran {run.ran} blocks; not run: " + "; ".join(waiting))
