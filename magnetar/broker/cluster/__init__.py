"""This broker among the brokers of its cluster: who owns a topic, and what a lookup answers.

- ``ownership``: :class:`Ownership`, the port the registry and the lookups ask; :class:`LocalOwnership`
  (one broker owns every topic) is the standalone's; the cluster issues put ZooKeeper behind the port;
- ``lookup``: one :class:`LookupAnswer` for the binary LOOKUP, the HTTP lookup and ``/admin/v2/brokers``;
- ``listeners``: ``advertisedListeners`` / ``internalListenerName``, the URLs per listener name.

Knows names and URLs, not topics: everything above may ask it, it asks nothing above it.
"""
