"""Turning options and broker answers into offset ranges: batch plans (with ``minPartitions``
splits at ledger boundaries) and streaming admission (``maxRecordsPerTrigger``/``maxBytesPerTrigger``
split across partitions in proportion to their backlog).

Async functions over ``magnetar.client`` plus pure arithmetic on message ids. Knows nothing of Spark.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

from magnetar.client import Client, MessageId
from magnetar.spark.discovery import Peek, full_name, last_ids, list_partitions, partition_of, peek_next
from magnetar.spark.offsets import BEFORE_FIRST, after, parse_user_offsets
from magnetar.spark.options import OptionError, SourceOptions
from magnetar.spark.scan import ScanRange

__all__ = ["admit", "full_name", "partition_of", "plan_batch", "resolve_starts", "split_range"]

_SPLITS_MAX = 1024


def _user(raw: str, option: str) -> dict[str, MessageId | str]:
    return {full_name(k): v for k, v in parse_user_offsets(raw, option).items()}


def _pick(choice: MessageId | str, last: MessageId, option: str, topic: str) -> MessageId:
    if isinstance(choice, MessageId):
        return choice
    if choice == "earliest":
        if option == "endingOffsets":
            raise OptionError(f"endingOffsets for {topic} cannot be earliest")
        return BEFORE_FIRST
    return last


async def resolve_starts(client: Client, opts: SourceOptions, topics: list[str],
                         lasts: Mapping[str, MessageId]) -> dict[str, MessageId]:
    """Exclusive start per partition from ``startingOffsets`` or ``startingTime``."""
    out: dict[str, MessageId] = {}
    given = _user(opts.starting, "startingOffsets") if opts.starting.startswith("{") else {}
    for topic in topics:
        last = lasts[topic]
        if opts.starting_time_ms is not None:  # readers cannot seek by time: the scan filters by publish time
            out[topic] = BEFORE_FIRST
            continue
        choice = given.get(topic, "earliest" if given else opts.starting)
        start = _pick(choice, last, "startingOffsets", topic)
        out[topic] = BEFORE_FIRST if start.entry_id < 0 and start.ledger_id == last.ledger_id else start
    return out


async def plan_batch(client: Client, opts: SourceOptions) -> list[ScanRange]:
    topics = await list_partitions(client, opts.topics)
    lasts = await last_ids(client, topics)
    starts = await resolve_starts(client, opts, topics, lasts)
    ends = _user(opts.ending, "endingOffsets") if opts.ending.startswith("{") else {}
    ranges = []
    for topic in topics:
        end = _pick(ends.get(topic, "latest"), lasts[topic], "endingOffsets", topic)
        if end.entry_id >= 0 and after(end, starts[topic]):
            ranges.append(ScanRange(topic, partition_of(topic), starts[topic], end,
                                    opts.starting_time_ms, opts.ending_time_ms))
    if opts.min_partitions and opts.min_partitions > len(ranges) and ranges:
        per_range = min(math.ceil(opts.min_partitions / len(ranges)), _SPLITS_MAX)
        ranges = [piece for rng in ranges for piece in split_range(rng, per_range)]
    return ranges


def split_range(rng: ScanRange, pieces: int) -> list[ScanRange]:
    """Up to ``pieces`` consecutive ranges, cut at ledger starts ``(L, -1)`` between the range's first
    and last ledger; a range inside one ledger is cut at entry boundaries instead."""
    lo, hi = max(rng.start.ledger_id, 0), rng.end.ledger_id
    if hi > lo:
        step = (hi - lo) / pieces
        cuts = sorted({MessageId(lo + math.ceil(step * i), -1) for i in range(1, pieces)} - {MessageId(lo, -1)})
    else:
        first = max(rng.start.entry_id, -1)
        step = (rng.end.entry_id - first) / pieces
        cuts = sorted({MessageId(hi, first + int(step * i)) for i in range(1, pieces)})
    cuts = [c for c in cuts if after(c, rng.start) and after(rng.end, c)]
    bounds = [rng.start, *cuts, rng.end]
    return [ScanRange(rng.topic, rng.partition, a, b, rng.start_time_ms, rng.end_time_ms, rng.check_loss and i == 0)
            for i, (a, b) in enumerate(itertools.pairwise(bounds))]


def _advance(peek: Peek, count: int, last: MessageId) -> MessageId:
    """The id ``count`` messages on from the first unread one (estimating later entries' batch sizes
    from the first), never past ``last``."""
    first, size = peek.first, peek.batch_size
    if first.batch_index < 0 or size <= 1:
        end = MessageId(first.ledger_id, first.entry_id + count - 1, -1)
    else:
        left_in_entry = size - first.batch_index
        if count <= left_in_entry:
            end = MessageId(first.ledger_id, first.entry_id, first.batch_index + count - 1)
        else:
            full, part = divmod(count - left_in_entry, size)
            end = (MessageId(first.ledger_id, first.entry_id + full, -1) if part == 0
                   else MessageId(first.ledger_id, first.entry_id + full + 1, part - 1))
    return last if after(end, last) else end


def _shares(total: int, backlogs: Mapping[str, float]) -> dict[str, int]:
    """Split ``total`` in proportion to backlog, no share above its backlog (water-filling); the sum
    never exceeds ``total`` and at least one partition gets something."""
    big = 1e15
    shares = {t: 0 for t in backlogs}
    open_ = sorted(backlogs)
    for _ in range(len(backlogs) + 1):  # each round fills at least one partition, or ends
        left = total - sum(shares.values())
        if left <= 0 or not open_:
            break
        weight = sum(min(backlogs[t], big) for t in open_)
        wants = {t: int(left * min(backlogs[t], big) / weight) for t in open_}
        if not any(wants.values()):
            wants[open_[0]] = 1
        full = []
        for t in open_:
            room = backlogs[t] - shares[t]
            if wants[t] >= room:
                wants[t] = int(room)
                full.append(t)
            shares[t] += wants[t]
        if not full:
            break
        open_ = [t for t in open_ if t not in full]
    left = total - sum(shares.values())
    for t in sorted(backlogs, key=lambda t: -backlogs[t])[:max(left, 0)]:  # rounding leftovers, one each
        if shares[t] < backlogs[t]:
            shares[t] += 1
    return shares


async def admit(client: Client, starts: Mapping[str, MessageId], lasts: Mapping[str, MessageId],
                max_rows: int | None, max_bytes: int | None) -> dict[str, MessageId]:
    """End offsets that take at most ``max_rows`` messages / ``max_bytes`` bytes (estimated) in all."""
    peeks: dict[str, Peek] = {}
    for topic, start in starts.items():
        if after(lasts[topic], start):
            peek = await peek_next(client, topic, start)
            if peek is not None and not after(peek.first, lasts[topic]):
                peeks[topic] = peek
    backlog: dict[str, float] = {}
    for topic, peek in peeks.items():
        last = lasts[topic]
        same = peek.first.ledger_id == last.ledger_id
        backlog[topic] = (last.entry_id - peek.first.entry_id + 1) * peek.batch_size if same else math.inf
    ends = dict(starts)
    if not peeks:
        return ends
    row_share = _shares(max_rows, backlog) if max_rows else None
    byte_share = _shares(max_bytes, {t: b * peeks[t].size_bytes for t, b in backlog.items()}) if max_bytes else None
    for topic, peek in peeks.items():
        count = row_share[topic] if row_share else math.inf
        if byte_share is not None:
            count = min(count, max(byte_share[topic] // peek.size_bytes, 1 if byte_share[topic] else 0))
        if count >= 1:
            ends[topic] = _advance(peek, int(min(count, 2**62)), lasts[topic])
    return ends
