"""Raw-wire helpers for the topic side of transactions: transactional sends, acks, reading what a plain
consumer is given (bounded waits only)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from magnetar import protocol as proto
from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.transactions.api import TxnId
from magnetar.metadata.memory import MemoryMetadataStore
from magnetar.storage.memory import MemoryLedgerStore
from tests.component.wire import T, WirePeer
from tests.txn_fakes import FakeRegistry

QUIET_S = 0.3  # how long "nothing more arrives" is watched for (a bound on a negative check, not a sync)


def entry(seq: int, body: bytes, *, producer: str, txn: TxnId | None = None) -> bytes:
    meta = proto.pb.MessageMetadata(producer_name=producer, sequence_id=seq, publish_time=1000 + seq)
    if txn is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = txn.most, txn.least
    return proto.make_entry(meta, body)


class Producer:
    def __init__(self, peer: WirePeer, producer_id: int, name: str) -> None:
        self.peer, self.producer_id, self.name = peer, producer_id, name
        self.seq = 0

    @classmethod
    async def create(cls, peer: WirePeer, topic: str, producer_id: int = 1) -> Producer:
        peer.send(proto.commands.producer(topic, producer_id, producer_id + 100))
        frame = await peer.expect(T.PRODUCER_SUCCESS)
        return cls(peer, producer_id, frame.command.producer_success.producer_name)

    async def send(self, body: bytes, txn: TxnId | None = None) -> proto.pb.BaseCommand:
        seq = self.seq
        self.seq += 1
        txnid = (txn.most, txn.least) if txn is not None else None
        self.peer.send(proto.commands.send(self.producer_id, seq, txnid=txnid),
                       entry(seq, body, producer=self.name, txn=txn))
        return (await self.peer.expect(T.SEND_RECEIPT, T.SEND_ERROR)).command


async def subscribe(peer: WirePeer, topic: str, sub: str = "sub", consumer_id: int = 7, sub_type: int = 0,
                    permits: int = 1000) -> None:
    peer.send(proto.commands.subscribe(topic, sub, sub_type, consumer_id, consumer_id + 200, initial_position=1))
    await peer.expect(T.SUCCESS)
    peer.send(proto.commands.flow(consumer_id, permits))


async def received(peer: WirePeer, count: int) -> list[tuple[bytes, proto.pb.MessageIdData]]:
    out = []
    for _ in range(count):
        frame = await peer.expect(T.MESSAGE)
        out.append((bytes(proto.entry_payload(bytes(frame.payload or b""))), frame.command.message.message_id))
    return out


async def nothing_more(peer: WirePeer) -> None:
    """No MESSAGE arrives within QUIET_S."""
    try:
        frame = await asyncio.wait_for(peer.next_frame(), QUIET_S)
    except TimeoutError:
        return
    raise AssertionError(f"unexpected frame {frame.command}")


async def ack(peer: WirePeer, consumer_id: int, mid: proto.pb.MessageIdData, txn: TxnId, request_id: int,
              *, cumulative: bool = False) -> proto.pb.CommandAckResponse:
    ack_type = proto.pb.CommandAck.Cumulative if cumulative else proto.pb.CommandAck.Individual
    plain = proto.ids.message_id(proto.ids.signed(mid.ledgerId), proto.ids.signed(mid.entryId))
    peer.send(proto.commands.ack(consumer_id, [plain], ack_type, txnid=(txn.most, txn.least), request_id=request_id))
    return (await peer.expect(T.ACK_RESPONSE)).command.ackResponse


async def start_broker(tmp_path: Path, metadata: MemoryMetadataStore, store: MemoryLedgerStore,
                       registry: FakeRegistry | None) -> Standalone:
    settings = StandaloneSettings(data_dir=tmp_path, bind_address="127.0.0.1", broker_port=0, web_port=0)
    sa = Standalone(settings, metadata=metadata, store=store)
    await sa.start()
    sa.broker.txn_registry = registry
    return sa


def crash(sa: Standalone) -> None:
    """Stop serving without closing or flushing anything: the stores keep exactly what was written."""
    sa.binary.servers[0].close()
    sa.broker.registry.shutting_down = True


@asynccontextmanager
async def broker(tmp_path: Path, metadata: MemoryMetadataStore, store: MemoryLedgerStore,
                 registry: FakeRegistry | None) -> AsyncIterator[Standalone]:
    sa = await start_broker(tmp_path, metadata, store, registry)
    try:
        yield sa
    finally:
        await sa.stop()
