"""Transactions (Pulsar's PIP-31): the coordinator, the per-topic transaction buffer, pending acks.

``api`` is the narrow seam between the two halves: the coordinator (which owns transaction state and its
log) and the participants (topics and subscriptions, which hold transactional messages and acks). Each
half depends only on ``api``, never on the other's modules, so either can be tested with a fake of the
other and the topic and connection modules meet transactions through these few calls only.
"""
