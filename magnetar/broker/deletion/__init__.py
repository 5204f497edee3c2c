"""Two-phase ledger deletion (PIP-186), the broker's half: the deletion system topics, the queue managed
ledgers drop ledgers into, the service that deletes them from storage, and the audit that proves none is
orphaned. The ledger layer's half (what is queued, the owner's "still in use" answer) is
:mod:`magnetar.ledger.deletion`.
"""
