"""A failed append never lets later sends overtake it, and its resend is never taken for a duplicate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from magnetar import protocol as proto
from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.api import StorageIOError
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.wire import T, WirePeer

TOPIC = "persistent://public/default/write-failure"


class FailOnce(MemoryLedgerStore):
    """Fails the first append whose data contains ``poison`` (a full disk at just the wrong moment)."""

    def __init__(self, poison: bytes) -> None:
        super().__init__()
        self.poison = poison
        self.tripped = False

    async def append(self, ledger_id: int, data: bytes | memoryview) -> int:
        if not self.tripped and self.poison in bytes(data):
            self.tripped = True
            raise StorageIOError("No space left on device (injected)", ledger_id=ledger_id)
        return await super().append(ledger_id, data)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Standalone]:
    settings = StandaloneSettings(data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0)
    sa = Standalone(settings, metadata=MemoryMetadataStore(), store=FailOnce(b"body-2"))
    await sa.start()
    try:
        yield sa
    finally:
        await sa.stop()


def entry(seq: int, producer: str) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name=producer, sequence_id=seq, publish_time=1)
    return proto.make_entry(meta, b"body-%d" % seq)


async def replies(peer: WirePeer, count: int) -> list[tuple[int, int, int]]:
    out = []
    for _ in range(count):
        cmd = (await peer.expect(T.SEND_RECEIPT, T.SEND_ERROR)).command
        if cmd.type == T.SEND_RECEIPT:
            receipt = cmd.send_receipt
            out.append((T.SEND_RECEIPT, receipt.sequence_id, proto.ids.signed(receipt.message_id.entryId)))
        else:
            out.append((T.SEND_ERROR, cmd.send_error.sequence_id, -1))
    return out


async def test_sends_after_a_failed_append_fail_too_and_resends_all_land_in_order(broker: Standalone) -> None:
    peer = await WirePeer.connect(broker.broker_port)
    peer.send(proto.commands.producer(TOPIC, 1, 1, producer_name="p"))
    await peer.expect(T.PRODUCER_SUCCESS)
    for seq in range(6):  # pipelined, as the client does
        peer.send(proto.commands.send(1, seq), entry(seq, "p"))
    first = await replies(peer, 6)
    assert [(kind, seq) for kind, seq, _ in first[:2]] == [(T.SEND_RECEIPT, 0), (T.SEND_RECEIPT, 1)]
    assert [kind for kind, _, _ in first[2:]] == [T.SEND_ERROR] * 4, "nothing may land after the failed one"
    # as Pulsar does, the broker closes the producer: a send already on its way after the failed one can never
    # be stored ahead of the failed one's resend (which dedup would then answer as a duplicate, unstored)
    await peer.expect(T.CLOSE_PRODUCER)
    peer.send(proto.commands.send(1, 6), entry(6, "p"))
    assert (await replies(peer, 1))[0][0] == T.SEND_ERROR
    peer.send(proto.commands.producer(TOPIC, 1, 2, producer_name="p"))  # the client reconnects its producer
    await peer.expect(T.PRODUCER_SUCCESS)
    for seq in range(2, 6):  # and resends what was not receipted
        peer.send(proto.commands.send(1, seq), entry(seq, "p"))
    again = await replies(peer, 4)
    assert all(kind == T.SEND_RECEIPT and entry_id >= 0 for kind, _, entry_id in again), again
    topic = broker.broker.registry.loaded[TOPIC]
    assert topic.ledger.number_of_entries() == 6
    bodies = []
    cursor = topic.ledger.new_non_durable_cursor(topic.ledger.next_valid_position(topic.ledger.first_position()), "r")
    for entry_read in await cursor.read_entries(10):
        bodies.append(bytes(proto.entry_payload(entry_read.data)))
    assert bodies == [b"body-%d" % i for i in range(6)]
    await peer.close()
