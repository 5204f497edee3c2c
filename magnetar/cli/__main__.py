"""``python -m magnetar.cli ...``: the same as the ``magnetar`` console script."""

import sys

from magnetar.cli.main import main

sys.exit(main())
