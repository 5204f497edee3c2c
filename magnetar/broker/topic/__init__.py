"""Entries in: a persistent topic and what it owns directly.

- ``persistent``: :class:`PersistentTopic`, its managed ledger, producers, subscriptions and counters;
- ``state``: its lifecycle (``TopicState``: ACTIVE, FENCED, CLOSING, CLOSED) and why it closes
  (``CloseReason``: MOVING - look it up again - or DELETED);
- ``producer``, ``access`` (PIP-68 access modes and the topic epoch), ``dedup`` (sequence ids per producer);
- ``positions``: the last visible message, the first entry published at a time;
- ``extensions``: the ports features plug into (transactions, the compacted view, replicators, marker hooks);
- ``listener``: :class:`TopicListener`, the load / close / delete callbacks the registry fans out.

Features (transactions, compaction, replication, ...) import this package; it imports none of them. Only
modules of this package assign a topic's attributes; everything else calls its methods or its ports.
"""
