"""The python process of one docs page: runs the page's python blocks one by one in one namespace.

Reads one JSON request a line on stdin (``page``, ``line``, ``code``, ``out``), runs the code as a script's
``__main__`` would (no top-level await: a block must work when pasted into a file), with file descriptors 1 and 2
sent to ``out`` (so child processes' output is caught too), and answers ``{"ok", "error"}`` on the original stdout.
Line numbers in a traceback are the page's.
"""

from __future__ import annotations

import json
import os
import sys
import traceback


def main() -> None:
    answers = os.fdopen(os.dup(1), "w")
    namespace: dict[str, object] = {"__name__": "__main__"}
    for line in sys.stdin:
        request = json.loads(line)
        fd = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        error = ""
        try:
            code = compile("\n" * request["line"] + request["code"], request["page"], "exec")
            exec(code, namespace)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = traceback.format_exc()
        except BaseException:
            error = traceback.format_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        answers.write(json.dumps({"ok": not error, "error": error}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
