"""Geo-replication: each replicated topic copies its locally published entries to the same topic in
every other cluster of its replication clusters (``api`` the plug points and names, ``replicator`` one
topic to one remote, ``service`` which replicators exist, ``stats``), and PIP-33 replicated
subscriptions on top of them (``subscriptions/``). A topic listener; the topic imports nothing of it.
"""
