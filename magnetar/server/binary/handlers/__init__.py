"""Command handlers, one module per family, joined into one dispatch table (``table.dispatch_table``).

Each handler sees its connection as a :class:`~magnetar.server.binary.session.Session` and never imports
the connection module (an import-linter contract keeps it so).
"""
