"""Every repository path the README and the docs name in backticks (`magnetar/...`, `tests/...`, `bench/...`,
`examples/...`, `scripts/...`, `docs/...`) exists, so a moved module or a renamed script fails here, not a reader."""

from __future__ import annotations

import re

from tests.docs.blocks import REPO, pages, rel

PATH = re.compile(r"`((?:magnetar|tests|bench|examples|scripts|docs)/[A-Za-z0-9_./-]*)")
#: pages whose paths are not checked yet, with the reason (keep empty when possible)
NOT_CHECKED: dict[str, str] = {}


def test_named_paths_exist() -> None:
    missing = []
    for page in pages():
        if rel(page) in NOT_CHECKED:
            continue
        for match in PATH.finditer(page.read_text(encoding="utf-8")):
            path = match.group(1).rstrip(".")
            if "*" not in path and "{" not in path and not (REPO / path).exists():
                missing.append(f"{rel(page)}: {path}")
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)
