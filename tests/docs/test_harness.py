"""The docs harness itself: a block that is unmarked, wrongly marked, failing, hanging or showing stale output
fails; ports are replaced only where they are ports. Runs `none` blocks only (no broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.blocks import MarkerError, parse_text
from tests.docs.page_run import BlockFailed, PageRun

FENCE = "```"


def page(*parts: str) -> str:
    return "\n".join(parts) + "\n"


def block(marker: str, lang: str, body: str) -> str:
    return f"<!-- test: {marker} -->\n{FENCE}{lang}\n{body}\n{FENCE}\n"


def run_page(tmp_path: Path, text: str) -> PageRun:
    run = PageRun("page.md", tmp_path / "page")
    try:
        run.run(parse_text(text, "page.md"))
    finally:
        run.close()
    return run


@pytest.mark.parametrize(("text", "error"), [
    (page("# t", "", f"{FENCE}bash", "echo hi", FENCE), "without a <!-- test"),
    (page("# t", "", "    echo indented"), "indented code block"),
    (page(block("brokers", "bash", "true")), "unknown need 'brokers'"),
    (page(block("", "bash", "true")), "empty marker"),
    (page(block("skip", "bash", "true")), "needs a reason"),
    (page(block("file ../x", "toml", "a = 1")), "one plain file name"),
    (page(block("none", "json", "{}")), "can only be `file NAME`"),
    (page(block("none timeout=0", "bash", "true")), "timeout must be within"),
    (page(block("none broker", "bash", "true")), "cannot be combined"),
    (page(block("none clusterName=x", "bash", "true")), "need `broker`"),
    (page(block("starts", "python", "pass")), "only a shell block"),
    (page("<!-- test: none -->", "", "no fence here"), "precedes no fenced code block"),
])
def test_markers_that_cannot_run_are_errors(text: str, error: str) -> None:
    with pytest.raises(MarkerError, match=error.replace("(", r"\(").replace("[", r"\[")) as info:
        parse_text(text, "page.md")
    assert str(info.value).startswith("page.md:")


def test_a_marker_may_stand_a_blank_line_before_its_block() -> None:
    blocks = parse_text(page("<!-- test: none timeout=5 -->", "", f"{FENCE}python", "x = 1", FENCE), "p.md")
    assert [(b.kind, b.needs, b.timeout_s, b.line) for b in blocks] == [("python", frozenset({"none"}), 5.0, 3)]


def test_files_shell_python_and_output_share_the_page(tmp_path: Path) -> None:
    run = run_page(tmp_path, page(
        block("file greeting.txt", "text", "hello from a file"),
        block("none", "bash", "cat greeting.txt\necho second line"),
        block("output", "text", "hello ... file\n...\nsecond line"),
        block("none", "python", "value = open('greeting.txt').read().split()[0]"),
        block("none", "python", "print(value.upper())"),
        block("output", "text", "HELLO"),
    ))
    assert run.ran == 3 and not run.not_run


@pytest.mark.parametrize(("blocks", "error"), [
    ((block("none", "bash", "echo one\nfalse\necho never"),), "exit status 1"),
    ((block("none", "bash", "echo actual"), block("output", "text", "expected")), "'expected' not found"),
    ((block("none", "python", "x = 1\nraise ValueError('boom')"),), 'File "page.md", line 4'),
    ((block("none", "python", "await something()"),), "SyntaxError"),
    ((block("none timeout=1", "python", "import threading\nthreading.Event().wait()"),), "still running after 1 s"),
    ((block("none timeout=1", "bash", "tail -f /dev/null"),), "still running"),
    ((block("none", "bash", "echo $UNSET_VARIABLE_OF_THE_DOCS"),), "unbound variable"),
])
def test_failing_blocks_fail_the_page(tmp_path: Path, blocks: tuple[str, ...], error: str) -> None:
    with pytest.raises(BlockFailed, match=error):
        run_page(tmp_path, page(*blocks))


def test_blocks_needing_what_is_not_wired_are_listed_not_passed(tmp_path: Path) -> None:
    run = run_page(tmp_path, page(block("cluster", "bash", "false"), block("none", "bash", "true")))
    assert run.ran == 1
    assert [(b.line, why) for b, why in run.not_run] == [(2, "needs cluster (not wired yet)")]


def test_documented_ports_are_replaced_where_they_are_ports(tmp_path: Path) -> None:
    run = PageRun("page.md", tmp_path / "page")
    try:
        text = run.substitute("pulsar://localhost:6650 --web-port 8080 webServicePortTls=8443 -m 6650 :1234")
    finally:
        run.close()
    broker, web, tls = run.ports[6650], run.ports[8080], run.ports[8443]
    assert text == f"pulsar://localhost:{broker} --web-port {web} webServicePortTls={tls} -m 6650 :1234"
    assert len({broker, web, tls}) == 3
