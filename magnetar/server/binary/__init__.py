"""The binary protocol's edge: listening sockets (``listener``), one task per connection that frames and
dispatches (``connection``, with ``flow``: output back-pressure, and ``limits``: connection counts), the
command handlers (``handlers/``, which see a connection as the narrow ``session.Session``), and the
re-check of connected clients when permissions change (``revalidate``)."""
