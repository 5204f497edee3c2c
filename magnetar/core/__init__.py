"""The bottom layer: mechanisms every other layer uses and none of them owns.

Injected time (``clock``), rate-limited logging (``logs``), the file-descriptor limit (``descriptors``),
test-only crash points (``crashpoints``) and fault plans (``faults``), a pass run every interval
(``periodic``), and the one way to write a lifecycle as a state machine (``lifecycle``).

Nothing here imports from another magnetar package (an import-linter layer keeps it so), and nothing here
knows what a topic, a ledger or a message is.
"""
