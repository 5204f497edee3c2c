"""Entries out: a subscription and what delivers its entries.

- ``subscription``: :class:`Subscription`, a cursor, its consumers, acks turned into cursor operations;
- ``consumer``: a consumer's permits, unacked entries and MESSAGE frames;
- ``dispatcher``: the read loop and the Exclusive / Failover dispatcher (the transaction gate it asks);
- ``dispatcher_shared``: the Shared and Key_Shared dispatchers; ``key_shared``: hash ranges and selectors;
- ``delayed``: delayed delivery.

Below the topic (which creates subscriptions), above the broker's base modules; no feature is imported here.
"""
