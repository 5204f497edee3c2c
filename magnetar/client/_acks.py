"""Acknowledgement bookkeeping: grouping acks into few ACK commands, and negative-ack deadlines.

``AckGroupingTracker`` collects individual and cumulative acks and turns them into at most one
cumulative ACK plus one individual ACK per flush (the consumer flushes every ``ack_group_time_ms``
or when ``ack_group_max_size`` are pending). Messages of a batch entry are tracked until every
index is acked (then the entry is acked), or, with batch-index acks on, sent with an ``ack_set``
of the indexes still unacked. ``NegativeAckTracker`` holds nacked entries until their delay passes.
Pure logic: no asyncio, no connection.
"""

from __future__ import annotations

from typing import Final

from magnetar.client._messages import MessageId
from magnetar.protocol import commands, ids, pb

__all__ = ["AckGroupingTracker", "NegativeAckTracker", "ack_set_words", "unacked_after", "unacked_except"]

Entry = tuple[int, int]
_U64: Final = 1 << 64
_I64_MAX: Final = (1 << 63) - 1


def bits_to_words(bits: int, batch_size: int) -> list[int]:
    """java.util.BitSet layout of an int bit set (bit i set = index i unacked) as signed int64 words: word by
    word, never index by index (a batch may hold thousands of messages)."""
    words = [(bits >> (64 * i)) & (_U64 - 1) for i in range((batch_size + 63) // 64)]
    return [w - _U64 if w > _I64_MAX else w for w in words]


def unacked_except(index: int, batch_size: int) -> list[int]:
    """The ack set of an ack of one index of a batch: every other index still unacked."""
    return bits_to_words(((1 << batch_size) - 1) & ~(1 << index), batch_size)


def unacked_after(index: int, batch_size: int) -> list[int]:
    """The ack set of a cumulative ack up to ``index`` of a batch: the indexes after it still unacked."""
    return bits_to_words(((1 << batch_size) - 1) & ~((1 << (index + 1)) - 1), batch_size)


def ack_set_words(unacked: set[int], batch_size: int) -> list[int]:
    """java.util.BitSet layout as signed int64 words: bit i of word i // 64 set when i is unacked."""
    words = [0] * ((batch_size + 63) // 64)
    for i in unacked:
        words[i // 64] |= 1 << (i % 64)
    return [w - _U64 if w > _I64_MAX else w for w in words]


class AckGroupingTracker:
    def __init__(self, *, max_size: int, batch_index_ack: bool) -> None:
        assert max_size > 0
        self._max_size = max_size
        self._batch_index_ack = batch_index_ack
        self._individual: dict[Entry, list[int] | None] = {}  # entry -> ack_set (None = whole entry)
        self._open_batches: dict[Entry, int] = {}  # unacked indexes of partly acked batches (bit i = index i)
        self._cumulative: tuple[Entry, list[int] | None] | None = None
        self._cumulative_sent: Entry = (-1, -1)

    def __len__(self) -> int:
        return len(self._individual) + (self._cumulative is not None)

    def add_individual(self, mid: MessageId, batch_size: int) -> bool:
        """Record an ack; True when enough are pending that the caller should flush now."""
        entry = mid.entry
        if mid.batch_index < 0 or batch_size <= 1:
            self._open_batches.pop(entry, None)
            self._individual[entry] = None
        else:
            unacked = self._open_batches.get(entry, (1 << batch_size) - 1) & ~(1 << mid.batch_index)
            if not unacked:
                self._open_batches.pop(entry, None)
                self._individual[entry] = None
            else:
                self._open_batches[entry] = unacked
                if self._batch_index_ack:
                    self._individual[entry] = bits_to_words(unacked, batch_size)
        return len(self._individual) >= self._max_size

    def add_cumulative(self, mid: MessageId, batch_size: int) -> None:
        entry, ack_set = mid.entry, None
        whole = mid.batch_index < 0 or batch_size <= 1 or mid.batch_index >= batch_size - 1
        if not whole:
            if self._batch_index_ack:
                ack_set = unacked_after(mid.batch_index, batch_size)
            else:
                entry = (mid.ledger_id, mid.entry_id - 1)  # the batch is finished only at its last index
        current = self._cumulative[0] if self._cumulative is not None else self._cumulative_sent
        if entry > current or (entry == current and ack_set is None and self._cumulative is not None):
            self._cumulative = (entry, ack_set)
        for done in [e for e in self._open_batches if e <= entry and not (e == entry and ack_set)]:
            del self._open_batches[done]

    def is_acked(self, mid: MessageId) -> bool:
        """Covered by a pending or sent cumulative ack, or by a pending whole-entry ack."""
        cumulative = self._cumulative[0] if self._cumulative is not None else self._cumulative_sent
        return mid.entry <= cumulative or self._individual.get(mid.entry, 0) is None

    def forget_sent(self) -> None:
        """After a seek the broker may resend what was acked before: stop filtering it."""
        self._cumulative_sent = (-1, -1)

    def take_commands(self, consumer_id: int) -> list[pb.BaseCommand]:
        """ACK commands for everything pending (cumulative first), and forget them."""
        out: list[pb.BaseCommand] = []
        if self._cumulative is not None:
            (ledger, entry), ack_set = self._cumulative
            out.append(commands.ack(consumer_id, [_mid(ledger, entry, ack_set)], pb.CommandAck.Cumulative))
            self._cumulative_sent = max(self._cumulative_sent, (ledger, entry))
            self._cumulative = None
        if self._individual:
            mids = [_mid(ledger, entry, ack_set) for (ledger, entry), ack_set in sorted(self._individual.items())]
            out.append(commands.ack(consumer_id, mids, pb.CommandAck.Individual))
            self._individual.clear()
        return out


def _mid(ledger: int, entry: int, ack_set: list[int] | None) -> pb.MessageIdData:
    mid = ids.message_id(ledger, entry)
    if ack_set:
        mid.ack_set.extend(ack_set)
    return mid


class NegativeAckTracker:
    """Nacked entries with a redelivery deadline; ``take_due`` hands back those whose time came."""

    def __init__(self, delay_ms: int) -> None:
        self._delay_ms = delay_ms
        self._deadlines: dict[Entry, float] = {}

    def __len__(self) -> int:
        return len(self._deadlines)

    def add(self, entry: Entry, now_ms: float) -> None:
        self._deadlines.setdefault(entry, now_ms + self._delay_ms)

    def take_due(self, now_ms: float) -> list[Entry]:
        due = sorted(e for e, t in self._deadlines.items() if t <= now_ms)
        for e in due:
            del self._deadlines[e]
        return due
