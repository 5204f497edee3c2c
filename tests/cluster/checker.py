"""The checker of the cluster tests: producers that record every receipt, and a read of everything back.

Each :class:`Load` producer (the official client, deduplication on: a fixed producer name) sends payloads
``<producer>:<seq>`` with increasing ``seq`` and records each receipt (payload, message id) with its time. Then
:func:`read_back` reads every partition from the start with readers, and :func:`verify` asserts:

- every receipted payload is present, exactly once (deduplication keeps resends out);
- each producer's payloads are in send order (its sequence increases along the topic);
- no message id was receipted for two payloads, and the payload read at a receipted id is the receipted one
  (a resend deduplication dropped is receipted with the id ``-1:-1``, as Pulsar does: no id to check);
- a payload that was never receipted (its send timed out) is there at most once.

``gaps`` gives the longest stretch without a receipt per producer (the unavailability a fault caused).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pulsar

READ_TIMEOUT_MS = 10_000
SEND_QUEUE_MAX = 200
READ_MESSAGES_MAX = 5_000_000


def message_key(msg_id: pulsar.MessageId) -> tuple[int, int, int, int]:
    return (msg_id.ledger_id(), msg_id.entry_id(), msg_id.partition(), msg_id.batch_index())


@dataclass
class Receipts:
    lock: threading.Lock = field(default_factory=threading.Lock)
    by_payload: dict[bytes, tuple[int, int, int, int]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
    failures: Counter[str] = field(default_factory=Counter)
    sent: Counter[str] = field(default_factory=Counter)

    def record(self, producer: str, payload: bytes, result: pulsar.Result, msg_id: pulsar.MessageId) -> None:
        with self.lock:
            if result != pulsar.Result.Ok:
                self.failures[str(result)] += 1
                return
            self.by_payload[payload] = message_key(msg_id)
            self.times.setdefault(producer, []).append(time.monotonic())

    def count(self) -> int:
        with self.lock:
            return len(self.by_payload)

    def gaps(self) -> dict[str, float]:
        """The longest time between two receipts of each producer (seconds)."""
        with self.lock:
            return {p: max((b - a for a, b in itertools.pairwise(t)), default=0.0) for p, t in self.times.items()}


class Load:
    """Producers sending on their own threads until :meth:`stop` (each with a bounded queue of sends)."""

    def __init__(self, client: pulsar.Client, topic: str, producers: int, *, prefix: str = "p",
                 rate_per_s: float = 200.0, send_timeout_ms: int = 30_000) -> None:
        self.client = client
        self.topic = topic
        self.receipts = Receipts()
        self._stop = threading.Event()
        self._rate = rate_per_s
        self._threads = [threading.Thread(target=self._run, args=(f"{prefix}{i}", send_timeout_ms), daemon=True)
                         for i in range(producers)]

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def _run(self, name: str, send_timeout_ms: int) -> None:
        producer = self.client.create_producer(
            self.topic, producer_name=name, batching_enabled=False, block_if_queue_full=True,
            max_pending_messages=SEND_QUEUE_MAX, send_timeout_millis=send_timeout_ms,
        )
        interval = 1.0 / self._rate
        seq = 0
        while not self._stop.wait(interval):  # ends at stop(); one send per interval
            payload = f"{name}:{seq}".encode()
            self.receipts.sent[name] += 1
            producer.send_async(payload, lambda res, mid, p=payload: self.receipts.record(name, p, res, mid))
            seq += 1
        producer.flush()
        producer.close()

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
            assert not thread.is_alive(), "a producer did not finish its sends"


def read_back(client: pulsar.Client, topic: str, partitions: int) -> list[tuple[tuple[int, int, int, int], bytes]]:
    """Every message of the topic (each partition from the start), in order per partition."""
    names = [(f"{topic}-partition-{i}", i) for i in range(partitions)] if partitions else [(topic, -1)]
    found: list[tuple[tuple[int, int, int, int], bytes]] = []
    for name, index in names:
        reader = client.create_reader(name, pulsar.MessageId.earliest)
        try:
            for _ in range(READ_MESSAGES_MAX):
                if not reader.has_message_available():
                    break
                message = reader.read_next(READ_TIMEOUT_MS)
                key = message_key(message.message_id())
                found.append(((key[0], key[1], index, key[3]), message.data()))
        finally:
            reader.close()
    return found


def verify(receipts: Receipts, read: list[tuple[tuple[int, int, int, int], bytes]]) -> dict[str, int]:
    """The checker's assertions (module docstring); returns counts for the report."""
    copies = Counter(payload for _, payload in read)
    receipted = receipts.by_payload
    missing = [p for p in receipted if copies[p] == 0]
    assert not missing, f"{len(missing)} receipted messages lost, e.g. {missing[:5]}"
    duplicated = [p for p, n in copies.items() if n > 1]
    assert not duplicated, f"{len(duplicated)} messages stored twice, e.g. {duplicated[:5]}"
    ids = Counter(key for key in receipted.values() if key[0] >= 0)
    shared = [i for i, n in ids.items() if n > 1]
    assert not shared, f"message ids receipted for two payloads: {shared[:5]}"
    at_id = {key: payload for key, payload in read}
    for payload, key in receipted.items():
        if key[0] < 0:
            continue  # a duplicate the broker dropped: it is stored (checked above) under its first id
        stored = at_id.get(key)
        assert stored == payload, f"receipt {key} was for {payload!r}, the topic holds {stored!r} there"
    last: dict[tuple[str, int], int] = {}
    for key, payload in read:  # in order within each partition
        producer, _, seq_text = payload.decode().rpartition(":")
        seq, where = int(seq_text), (producer, key[2])
        assert seq > last.get(where, -1), f"{producer}: {seq} after {last[where]} in partition {key[2]}"
        last[where] = seq
    return {"receipted": len(receipted), "stored": len(read), "unreceipted_stored": len(read) - len(receipted),
            "receipted_as_duplicates": sum(1 for key in receipted.values() if key[0] < 0)}
