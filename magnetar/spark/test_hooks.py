"""A test-only pause point so the crash tests kill a Spark driver at an exact moment, with no sleeps.

When ``MAGNETAR_SPARK_TEST_HOOK`` is ``point:directory`` and the sink reaches ``point`` (``task_written``,
``commit_start``, ``intent_written``, ``committed``), it writes its pid to ``directory/point`` and blocks until the
test SIGKILLs the process. Unset (always, outside those tests) it costs one dictionary lookup. The
environment is read here rather than in ``config.py`` because it is no setting: nothing else may use it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Final

__all__ = ["ENV", "reached"]

ENV: Final = "MAGNETAR_SPARK_TEST_HOOK"
_BLOCK_S: Final = 600.0


def reached(point: str) -> None:
    wanted = os.environ.get(ENV)
    if not wanted or wanted.split(":", 1)[0] != point:
        return
    signal = Path(wanted.split(":", 1)[1]) / point
    signal.write_text(str(os.getpid()))  # the process to kill, besides the driver
    threading.Event().wait(_BLOCK_S)  # the test kills us long before this passes
    raise RuntimeError(f"test hook {point}: nobody killed the process within {_BLOCK_S} s")
