"""Non-persistent topics (``non-persistent://``): at-most-once fan-out with no storage.

A message goes straight from the producer to one consumer of each subscription that has a permit for it
and is dropped (counted as ``msgDrop``) where none has; nothing is written, acknowledged or redelivered,
and a subscription lives only while it has consumers. Topics live in memory only while used. Knows nothing
of the wire: the server's ``handlers/nonpersistent.py`` routes commands for these topics here.
"""

from magnetar.broker.nonpersistent.topic import NonPersistentSubscription, NonPersistentTopic, NonPersistentTopics

__all__ = ["NonPersistentSubscription", "NonPersistentTopic", "NonPersistentTopics"]
