"""The managed-ledger layer: see api.py for the interface and each module's docstring for its part.

Entry point: ``magnetar.ledger.factory.LedgerFactory(store, metadata, *, config, clock, sleep_ms)``.
Modules: ``managed`` (the managed ledger), ``recovery`` (opening), ``cursor`` (cursors), ``acks`` (ack rules),
``ranges`` (merged position ranges), ``ledger_list`` (position arithmetic), ``bitset`` (batch ack sets),
``formats`` (metadata keys and records), ``states`` (lifecycles).
"""
