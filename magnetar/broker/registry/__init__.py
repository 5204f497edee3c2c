"""The topic lifecycle of this broker and the rules of topic creation.

- ``registry``: :class:`TopicRegistry`, the loaded topics: get (load or create), unload, delete, close_all,
  one close path with its reason, and the listener fan-out to every feature;
- ``catalog``: :class:`TopicCatalog`, which topics exist and may be created (namespaces, partitioned-topic
  metadata, auto-creation, ``maxTopicsPerNamespace``, listing);
- ``inactive``: the sweep that unloads (or deletes) topics nobody uses.

Above the features (it may import them to wire their rules in), below the admin use cases.
"""
