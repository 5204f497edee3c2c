"""A record damaged on disk is never delivered: dispatch stalls loudly, or skips it when configured."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from magnetar import protocol as proto
from magnetar.app.settings import StandaloneSettings
from magnetar.app.standalone import Standalone
from magnetar.broker.admin.stats import RateTracker
from magnetar.broker.config import BrokerConfig
from magnetar.broker.names import TopicName
from magnetar.server.metrics.registry import broker_registry
from tests.component.wire import T, WirePeer

WAIT_S = 10.0
TOPIC = "persistent://public/default/corrupted"


class LogEvent(logging.Handler):
    """Sets an asyncio event when a record containing ``text`` is logged."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.seen.set()


def settings(data_dir: Path, *, auto_skip: bool) -> StandaloneSettings:
    broker = dataclasses.replace(BrokerConfig(), auto_skip_non_recoverable_data=auto_skip)
    return StandaloneSettings(data_dir=data_dir, bind_address="127.0.0.1", broker_port=0, web_port=0, broker=broker)


async def write_three_entries(data_dir: Path) -> None:
    sa = Standalone(settings(data_dir, auto_skip=False))
    await sa.start()
    topic = await sa.broker.registry.get(TopicName.parse(TOPIC), create=True)
    for i in range(3):
        meta = proto.pb.MessageMetadata(producer_name="p", sequence_id=i, publish_time=1)
        await topic.ledger.add_entry(proto.make_entry(meta, b"entry-%d" % i))
    await sa.stop()


def damage_entry(data_dir: Path, body: bytes) -> None:
    [log_file] = [p for p in data_dir.rglob("*.log") if body in p.read_bytes()]
    data = bytearray(log_file.read_bytes())
    at = data.index(body)
    data[at] ^= 0xFF
    log_file.write_bytes(bytes(data))


async def bodies_received(peer: WirePeer, count: int) -> list[bytes]:
    out = []
    for _ in range(count):
        frame = await peer.expect(T.MESSAGE)
        out.append(bytes(proto.entry_payload(bytes(frame.payload or b""))))
    return out


@pytest.mark.parametrize("auto_skip", [False, True])
async def test_corrupted_middle_entry(tmp_path: Path, auto_skip: bool) -> None:
    await write_three_entries(tmp_path)
    damage_entry(tmp_path, b"entry-1")
    watcher = LogEvent("failed its checksum")
    logging.getLogger("magnetar.broker.dispatcher").addHandler(watcher)
    sa = Standalone(settings(tmp_path, auto_skip=auto_skip))
    await sa.start()
    try:
        peer = await WirePeer.connect(sa.broker_port)
        peer.send(proto.commands.subscribe(TOPIC, "sub", 0, 1, 1, initial_position=1))
        await peer.expect(T.SUCCESS)
        peer.send(proto.commands.flow(1, 100))
        assert await bodies_received(peer, 1) == [b"entry-0"]
        await asyncio.wait_for(watcher.seen.wait(), WAIT_S)
        dispatcher = sa.broker.registry.loaded[TOPIC].subscriptions["sub"].dispatcher
        assert dispatcher is not None and dispatcher.corrupted_entries >= 1
        metrics = generate_latest(broker_registry(sa.broker, RateTracker(sa.clock))).decode()
        labels = f'cluster="standalone",namespace="public/default",topic="{TOPIC}"'
        assert f"magnetar_storage_corrupted_entries_total{{{labels}}} 1.0" in metrics
        if auto_skip:
            assert await bodies_received(peer, 1) == [b"entry-2"]
        else:
            # stalled: nothing more arrives; a PING still gets its PONG, so the broker is serving
            peer.send(proto.commands.ping())
            assert (await peer.expect(T.PONG)).command.type == T.PONG
        await peer.close()
    finally:
        logging.getLogger("magnetar.broker.dispatcher").removeHandler(watcher)
        await sa.stop()
