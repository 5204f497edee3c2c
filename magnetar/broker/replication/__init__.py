"""Geo-replication: each replicated topic copies its locally published entries to the same topic in
every other cluster of its replication clusters (``api`` the plug points and reserved names,
``replicator`` one topic to one remote, ``service`` which replicators exist). Kept import-light: the
topic imports ``api`` only.
"""
