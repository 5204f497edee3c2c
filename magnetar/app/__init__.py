"""The composition root: the only place that builds the stores, the broker's parts and the network edges
once and wires them (``broker``: one broker's parts, started and stopped in order; ``standalone``: the
``magnetar standalone`` process; ``settings``: what the process is configured with, composed from per-area
groups). ``magnetar.config`` reads the files and flags into these settings; nothing here reads either."""
