"""A test-only pause point so the crash tests kill a Spark driver or executor at an exact moment, with no sleeps.

When ``MAGNETAR_SPARK_TEST_HOOK`` is ``point:directory`` and the sink reaches ``point`` (``txn_opened``,
``task_written``, ``commit_start``, ``intent_written``, ``committed``) for the first time, it writes its pid to
``directory/point`` and blocks until the test SIGKILLs the process; later arrivals (a retried task, the other
tasks of the batch) find the file there and go on. Unset (always, outside those tests) it costs one dictionary
lookup. The environment is read here rather than in ``config.py`` because it is no setting: nothing else may use
it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Final

__all__ = ["ENV", "POINTS", "reached"]

ENV: Final = "MAGNETAR_SPARK_TEST_HOOK"
POINTS: Final = ("txn_opened", "task_written", "commit_start", "intent_written", "committed")
_BLOCK_S: Final = 600.0


def reached(point: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted or wanted.split(":", 1)[0] != point:
        return
    signal = Path(wanted.split(":", 1)[1]) / point
    try:
        fd = os.open(signal, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return  # another process stopped here first
    try:
        os.write(fd, str(os.getpid()).encode())  # the process to kill, besides the driver
    finally:
        os.close(fd)
    threading.Event().wait(_BLOCK_S)  # the test kills us long before this passes
    raise RuntimeError(f"test hook {point}: nobody killed the process within {_BLOCK_S} s")
