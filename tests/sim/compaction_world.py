"""The seeded simulator, compaction: keyed puts and tombstones (batched or not, several in flight),
compactions run in the background, time, graceful restarts and crashes at any moment (a crash cuts a
compaction in either pass or in its switch; unsynced writes vanish) over the crashable storage of
``world.py``. After every restart and crash, and whenever a compaction finished:

* the compacted ledger alone is the dict model of the topic's stream up to the horizon: each key once, with
  its latest value, no tombstone, no keyless message, in position order (never a mix of two views);
* the latest values (the view, then the entries after the horizon) are the dict model of the whole stream;
* every receipted message is in the stream (nothing compaction does loses a key);
* a compaction a crash interrupted runs again on recovery, and ends with a view up to its cut-off.

Run it: ``.venv/bin/python -m tests.sim.compaction_world --seeds 1000 --ops 200`` (``--seed N --trace``).
"""

from __future__ import annotations

import asyncio
import random
import sys
from dataclasses import dataclass

from magnetar import protocol as proto
from magnetar.broker.compaction import CompactedTopic
from magnetar.broker.compaction.compactor import compact
from magnetar.broker.compaction.entries import messages_of
from magnetar.core.clock import ManualClock
from magnetar.ledger.api import ManagedLedgerConfig, ManagedLedgerError, Position
from magnetar.ledger.factory import LedgerFactory
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.faulty import CrashableLedgerStore, SimDisk
from tests.sim.world import SeedTrace, Timers, let_turns_pass, seed_main

NAME = "sim/ns/persistent/compacted"
KEYS = ("a", "b", "c", "d", "e", "f")
MAX_SIZE = 1 << 20
SETTLE_TURNS = 40
Model = dict[str, bytes]


@dataclass
class CompactionStats:
    ops: int = 0
    crashes: int = 0
    restarts: int = 0
    compactions: int = 0
    interrupted: int = 0  # compactions a crash cut (pass 1, pass 2 or the switch)
    reruns: int = 0


def _fold(model: Model, data: bytes) -> None:
    meta = proto.parse_entry_metadata(data)
    if meta.HasField("marker_type"):
        return
    for m in messages_of(data, meta, MAX_SIZE):
        if m.key is not None:
            model.pop(m.key, None)
            if not m.null_value:
                model[m.key] = m.body


class CompactionSimulation(SeedTrace):
    FAIL_LABEL = "compaction seed"

    def __init__(self, seed: int, ops: int) -> None:
        self.seed, self.ops_total = seed, ops
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.disk = SimDisk(random.Random(self.rng.getrandbits(64)))
        self.metadata = MemoryMetadataStore(clock=self.clock)
        self.config = ManagedLedgerConfig(max_entries_per_ledger=self.rng.choice([3, 8, 50]))
        self.next_seq = 0
        self.receipted: dict[int, Position] = {}
        self.inflight: set[asyncio.Task[None]] = set()
        self.compaction: asyncio.Task[None] | None = None
        self.stats = CompactionStats()
        self.trace: list[str] = []
        self.step = 0
        self.world = 0

    # ---- worlds --------------------------------------------------------------------------------------------

    async def boot(self) -> None:
        self.world += 1
        self.timers = Timers(self.clock)
        self.store = CrashableLedgerStore(self.disk, clock=self.clock)
        self.factory = LedgerFactory(self.store, self.metadata, config=self.config, clock=self.clock,
                                     sleep_ms=self.timers.sleep_ms)
        self.ledger = await self.factory.open(NAME)
        self.topic = CompactedTopic(NAME, self.ledger, self.store, max_message_size=MAX_SIZE)
        await self.topic.recover()
        if self.topic.needs_rerun:
            self.stats.reruns += 1
            self.note("rerun an interrupted compaction")
            self.start_compaction()

    async def run(self) -> CompactionStats:
        await self.boot()
        operations = [(40, self.op_send), (12, self.op_compact), (15, self.op_advance), (3, self.op_restart),
                      (5, self.op_crash)]  # fmt: skip
        weights = [w for w, _ in operations]
        for step in range(1, self.ops_total + 1):
            self.step = step
            _, op = self.rng.choices(operations, weights)[0]
            await op()
            self.stats.ops += 1
            await let_turns_pass(self.rng.randint(0, 5))
        self.step += 1
        await self.settle()
        self.start_compaction()
        await self.settle()
        await self.check()
        self.timers.cancel_all()
        await self.factory.close()
        return self.stats

    # ---- operations ----------------------------------------------------------------------------------------

    def spawn(self, work: asyncio.Future[None] | asyncio.Task[None]) -> None:
        task = asyncio.ensure_future(work)
        self.inflight.add(task)
        task.add_done_callback(self.inflight.discard)

    def entries(self, count: int) -> list[bytes]:
        messages = []
        for _ in range(count):
            key = self.rng.choice((*KEYS, None))
            value = None if self.rng.random() < 0.2 else self.rng.choice([b"", b"%d" % self.next_seq])
            messages.append((key, value, self.next_seq))
            self.next_seq += 1
        if len(messages) == 1 or self.rng.random() < 0.5:
            out = []
            for key, value, seq in messages:
                meta = proto.pb.MessageMetadata(producer_name="sim", sequence_id=seq, publish_time=1)
                if key is not None:
                    meta.partition_key = key
                meta.null_value = value is None
                out.append(proto.make_entry(meta, value or b""))
            return out
        singles = []
        for key, value, seq in messages:
            single = proto.pb.SingleMessageMetadata(payload_size=0, sequence_id=seq, null_value=value is None)
            if key is not None:
                single.partition_key = key
            singles.append((single, value or b""))
        meta = proto.pb.MessageMetadata(producer_name="sim", sequence_id=messages[0][2], publish_time=1,
                                        num_messages_in_batch=len(singles))
        return [proto.make_entry(meta, proto.build_batch(singles))]

    async def op_send(self) -> None:
        for data in self.entries(self.rng.randint(1, 4)):
            seq = int(proto.parse_entry_metadata(data).sequence_id)
            try:
                future = self.ledger.add_entry_future(data)
            except ManagedLedgerError:
                return
            future.add_done_callback(lambda f: f.cancelled() or f.exception())  # a crashed world's failures
            self.spawn(self.receipt(seq, future, self.world))
        self.note(f"send up to seq {self.next_seq - 1}")

    async def receipt(self, seq: int, future: asyncio.Future[Position], world: int) -> None:
        try:
            position = await future
        except (ManagedLedgerError, asyncio.CancelledError):
            return
        if world == self.world:
            self.receipted[seq] = position

    def start_compaction(self) -> None:
        if self.compaction is not None and not self.compaction.done():
            return
        self.compaction = asyncio.ensure_future(self.compact(self.world))
        self.inflight.add(self.compaction)
        self.compaction.add_done_callback(self.inflight.discard)

    async def compact(self, world: int) -> None:
        try:
            result = await compact(self.topic, self.clock)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # a compaction fails only when its world crashed under it
            if world == self.world:
                raise self.fail(f"compaction failed in a live world: {exc!r}") from exc
            return
        if world == self.world:
            self.stats.compactions += 1
            self.note(f"compacted up to {result.view.horizon}: {result.view.entries} entries")

    async def op_compact(self) -> None:
        self.start_compaction()
        self.note("compact")

    async def op_advance(self) -> None:
        self.clock.advance(self.rng.choice([10, 60, 200, 1500]))
        self.timers.fire_due()
        await let_turns_pass(SETTLE_TURNS)
        self.note("advance")

    async def settle(self) -> None:
        for _ in range(100):  # bounded: each round fires timers and waits for what is in flight
            if not self.inflight:
                return
            self.clock.advance(200)
            self.timers.fire_due()
            await let_turns_pass(SETTLE_TURNS)
        raise self.fail(f"{len(self.inflight)} operations never finished")

    async def op_restart(self) -> None:
        await self.settle()
        self.timers.cancel_all()
        await self.factory.close()
        self.stats.restarts += 1
        self.note("restart")
        await self.boot()
        await self.check()

    async def op_crash(self) -> None:
        if self.compaction is not None and not self.compaction.done():
            self.stats.interrupted += 1
        self.disk.crash(keep_unsynced_probability=0.5)
        self.timers.cancel_all()
        for task in list(self.inflight):
            task.cancel()
        if self.inflight:
            await asyncio.wait(list(self.inflight))
        self.stats.crashes += 1
        self.note("crash")
        await self.boot()
        await self.check()

    # ---- invariants ----------------------------------------------------------------------------------------

    async def stream(self) -> list[tuple[Position, bytes]]:
        """Every entry the topic stores, in order (the ground truth the ledger simulator checks)."""
        cursor = self.ledger.new_non_durable_cursor(self.ledger.next_valid_position(self.ledger.first_position()),
                                                    "check")
        out: list[tuple[Position, bytes]] = []
        while batch := await cursor.read_entries(128):  # each read moves forward
            out.extend((e.position, e.data) for e in batch)
        await cursor.close()
        return out

    async def check(self) -> None:
        stream = await self.stream()
        seqs = {int(proto.parse_entry_metadata(d).sequence_id): p for p, d in stream}
        for seq, position in self.receipted.items():
            if seq not in seqs and not any(p == position for p in seqs.values()):
                raise self.fail(f"receipted seq {seq} at {position} is not in the topic")
        view = self.topic.view
        if view is not None:
            entries = await self.topic.read(view, 0, view.entries - 1) if view.entries else []
            if [e.position for e in entries] != sorted({e.position for e in entries}):
                raise self.fail("compacted entries out of position order")
            held = [m for e in entries for m in messages_of(e.data, proto.parse_entry_metadata(e.data), MAX_SIZE)]
            if any(m.key is None or m.null_value for m in held) or len({m.key for m in held}) != len(held):
                raise self.fail(f"the view holds a tombstone, a keyless message or a key twice: {held}")
            at_horizon: Model = {}
            for position, data in stream:
                if position <= view.horizon:
                    _fold(at_horizon, data)
            if {m.key: m.body for m in held} != at_horizon:
                raise self.fail(f"view {held} is not the model at {view.horizon}: {at_horizon}")
        now: Model = {}
        for _, data in stream:
            _fold(now, data)
        latest = {k: v.value for k, v in (await self.topic.latest_values()).items()}
        if latest != now:
            raise self.fail(f"latest values {latest} != model {now}")
        self.note(f"checked: {len(stream)} entries, {len(now)} keys, view {view}")


def run_compaction_seed(seed: int, ops: int) -> tuple[CompactionStats, str]:
    sim = CompactionSimulation(seed, ops)
    stats = asyncio.run(sim.run())
    return stats, sim.digest()


def main(argv: list[str] | None = None) -> int:
    return seed_main(argv, CompactionSimulation, module="tests.sim.compaction_world", default_ops=200,
                     doc=__doc__)


if __name__ == "__main__":
    sys.exit(main())
