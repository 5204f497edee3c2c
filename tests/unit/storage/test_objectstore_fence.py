"""The fence in the bucket: seals by other stores, racing writers, lost answers and failed PUTs."""

from __future__ import annotations

import asyncio
import random

import pytest

from magnetar.core.faults import FaultPlan
from magnetar.storage import LedgerFenced, StorageIOError, WriteOutcomeUnknown
from magnetar.storage.objectstore import ObjectLedgerStore
from magnetar.storage.objectstore._chunks import DATA, FENCE, SEAL, decode_header
from magnetar.storage.objectstore.memory import OPS
from tests.unit.storage.objectstore_world import WAIT_S, World


class FailOps(FaultPlan):
    """Fails the ``op`` requests numbered in ``which`` (1-based, counted per op)."""

    def __init__(self, **which: set[int]) -> None:
        super().__init__(random.Random(0), ops=OPS, fail_probability=1.0)
        self.which = which
        self.seen: dict[str, int] = {}

    def should_fail(self, op: str) -> bool:
        self.seen[op] = self.seen.get(op, 0) + 1
        fail = self.seen[op] in self.which.get(op, set())
        self.injected += fail
        return fail


def assert_one_create_per_key(world: World) -> None:
    assert set(world.bucket.creates.values()) <= {1}, world.bucket.creates


def assert_data_then_seals(world: World, ledger_id: int) -> None:
    """The ledger's keys are seqs 0..n without a gap: data chunks, then seals only."""
    keys = world.chunk_keys(ledger_id)
    assert [int(k.rsplit("/", 1)[1]) for k in keys] == list(range(len(keys)))
    kinds = [decode_header(world.bucket.objects[k], ledger_id, 0).kind for k in keys]
    data = kinds.count(DATA)
    assert kinds[:data] == [DATA] * data and set(kinds[data:]) <= {SEAL, FENCE} and kinds[data:], kinds


async def test_a_seal_by_another_store_fences_the_writer() -> None:
    world = World()
    writer, sealer = await world.store(), await world.store()
    ledger_id = (await writer.create_ledger({})).ledger_id
    acked = [await writer.append(ledger_id, b"a%d" % i) for i in range(3)]
    sealed = await sealer.seal(ledger_id)
    assert (sealed.entries, sealed.sealed) == (3, True)
    with pytest.raises(LedgerFenced):
        await writer.append(ledger_id, b"zombie")
    with pytest.raises(LedgerFenced):  # and every later one
        await writer.append(ledger_id, b"zombie 2")
    assert await sealer.read(ledger_id, 0, 2) == [b"a%d" % i for i in acked]
    assert (await writer.info(ledger_id)).entries == 3  # the writer now sees the bucket's seal
    assert (await writer.seal(ledger_id)).entries == 3
    assert_one_create_per_key(world)


async def write_until_fenced(world: World, writer: ObjectLedgerStore, ledger_id: int, acked: list[int]) -> None:
    """Append batches of 1-3 until fenced, noting every acknowledged entry id."""
    for _ in range(40):  # bounded: the sealer fences it long before
        count = world.rng.randint(1, 3)
        batch = [writer.start_append(ledger_id, b"p%d" % (len(acked) + j)) for j in range(count)]
        for result in await asyncio.gather(*batch, return_exceptions=True):
            if not isinstance(result, int):
                assert isinstance(result, LedgerFenced), result
                return
            acked.append(result)
    raise AssertionError("the writer was never fenced")


async def test_racing_writer_and_sealer_lose_nothing_acknowledged() -> None:
    outcomes, races_lost = set(), 0
    for seed in range(40):
        world = World(seed=seed)
        writer = await world.store(world.client(latency_turns_max=seed % 3))
        sealer = await world.store(world.client(latency_turns_max=4 + seed % 5))
        ledger_id = (await writer.create_ledger({})).ledger_id
        acked: list[int] = []
        task = asyncio.ensure_future(write_until_fenced(world, writer, ledger_id, acked))
        for _ in range(world.rng.randint(0, 30)):
            await asyncio.sleep(0)
        sealed = await asyncio.wait_for(sealer.seal(ledger_id), WAIT_S)
        await asyncio.wait_for(task, WAIT_S)
        assert acked == list(range(len(acked)))  # a prefix, in order
        assert sealed.entries >= len(acked)  # nothing acknowledged lies above the seal
        stored = await sealer.read(ledger_id, 0, sealed.entries - 1) if sealed.entries else []
        assert stored == [b"p%d" % i for i in range(sealed.entries)]
        assert_one_create_per_key(world)
        assert_data_then_seals(world, ledger_id)
        outcomes.add((len(acked) > 0, sealed.entries > len(acked)))
        races_lost += sealer.seal_races_lost
    assert (True, False) in outcomes  # the seal landed between two of the writer's chunks
    assert races_lost > 0  # and the writer took the sealer's first choice of seq in some seeds


async def test_a_lost_answer_is_found_to_be_ours_and_acknowledged() -> None:
    world = World()
    client = world.client()
    client.lost_answer_probability = 1.0
    store = await world.store(client)
    ledger_id = (await store.create_ledger({})).ledger_id
    client.plan = FailOps(put=set(range(1, 3)))  # two PUTs time out; each still lands
    assert await asyncio.wait_for(store.append(ledger_id, b"once"), WAIT_S) == 0
    assert len(world.chunk_keys(ledger_id)) == 1
    assert store.requests.retries >= 1
    assert await store.append(ledger_id, b"twice") == 1
    assert_one_create_per_key(world)


async def test_a_put_that_keeps_failing_fails_the_append_and_every_later_one() -> None:
    world = World()
    client = world.client()
    client.lost_answer_probability = 1.0
    store = await world.store(client, attempts_max=2)
    ledger_id = (await store.create_ledger({})).ledger_id
    await store.append(ledger_id, b"kept")
    client.plan = FailOps(put={1, 2}, get={1, 2})  # the chunk lands, but neither try learns whose it is
    with pytest.raises(WriteOutcomeUnknown):
        await store.append(ledger_id, b"unknown outcome")
    client.plan = None
    with pytest.raises(StorageIOError) as later:
        await store.append(ledger_id, b"after the failure")
    assert not isinstance(later.value, WriteOutcomeUnknown)  # never sent: it did not happen
    assert len(world.chunk_keys(ledger_id)) == 2  # the failed chunk landed after all
    sealed = await store.seal(ledger_id)
    assert sealed.entries == 1  # the seal counts what was acknowledged, not what landed
    header = decode_header(world.bucket.objects[world.chunk_keys(ledger_id)[-1]], ledger_id, 2)
    assert header.kind == SEAL and header.first_entry == 1
    other = await world.store()
    assert (await other.info(ledger_id)).entries == 1
    assert await other.read(ledger_id, 0, 0) == [b"kept"]


async def test_a_seal_on_a_failed_chunk_seq_keeps_the_failed_append_out_for_ever() -> None:
    world = World()
    client = world.client()
    client.lost_answer_probability = 0.0  # fails before the bucket: the chunk never lands
    store = await world.store(client, attempts_max=1)
    ledger_id = (await store.create_ledger({})).ledger_id
    client.plan = FailOps(put={1})
    with pytest.raises(StorageIOError):
        await store.append(ledger_id, b"lost")
    sealed = await store.seal(ledger_id)
    assert sealed.entries == 0
    header = decode_header(world.bucket.objects[world.chunk_keys(ledger_id)[0]], ledger_id, 0)
    assert header.kind == SEAL  # seq 0, where the failed chunk would have gone


async def test_the_writer_of_a_deleted_ledger_is_still_refused() -> None:
    world = World()
    writer, owner = await world.store(), await world.store()
    ledger_id = (await writer.create_ledger({})).ledger_id
    await writer.append(ledger_id, b"old")
    await owner.delete(ledger_id)  # seal, then delete: the seal object stays
    with pytest.raises(LedgerFenced):
        await writer.append(ledger_id, b"would be lost")
    assert len(world.chunk_keys(ledger_id)) == 1
    assert ledger_id not in await owner.list_ledgers()
    assert_one_create_per_key(world)


async def test_an_interrupted_delete_is_finished_by_the_next_and_keeps_the_fences() -> None:
    world = World()
    writer, owner = await world.store(flush_max_bytes=1), await world.store()
    ledger_id = (await writer.create_ledger({})).ledger_id
    await asyncio.gather(*(writer.append(ledger_id, b"%d" % i) for i in range(4)))  # chunks 0..3
    await owner.seal(ledger_id)  # seal at 4
    world.bucket.objects.pop(world.chunk_keys(ledger_id)[3])  # a delete cut after its first key (top down)
    again = await world.store()
    await again.delete(ledger_id)
    left = [k.rsplit("/", 1)[1] for k in world.chunk_keys(ledger_id)]
    assert left == ["0000000003", "0000000004"]  # the new seal at the gap and the old one both stay
    with pytest.raises(LedgerFenced):
        await writer.append(ledger_id, b"late")


async def test_two_sealers_racing_agree_on_the_lowest_seal() -> None:
    for seed in range(20):
        world = World(seed=seed)
        writer = await world.store()
        ledger_id = (await writer.create_ledger({})).ledger_id
        await asyncio.gather(*(writer.append(ledger_id, b"x") for _ in range(3)))
        a = await world.store(world.client(latency_turns_max=3))
        b = await world.store(world.client(latency_turns_max=3))
        first, second = await asyncio.gather(a.seal(ledger_id), b.seal(ledger_id))
        assert first == second and first.entries == 3
        kinds = [decode_header(world.bucket.objects[k], ledger_id, 0).kind for k in world.chunk_keys(ledger_id)]
        assert kinds[0] == DATA and set(kinds[1:]) == {FENCE}  # the lowest fence is the seal; more may stack
        assert (await writer.info(ledger_id)).entries == 3
        assert_one_create_per_key(world)
