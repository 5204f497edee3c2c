"""magnetar's commands: ``magnetar standalone | admin | perf | tokens | spark``.

The top layer: it may import every other package, and none imports it. Only this package and ``config`` read
settings files, the environment and the command line. ``main`` (the console script ``magnetar`` and
``python -m magnetar.cli``) lives in ``cli/main.py``; each command in its own module.
"""

from magnetar.cli.main import main

__all__ = ["main"]
