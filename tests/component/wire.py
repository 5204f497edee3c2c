"""A minimal raw-protocol peer for component tests: send commands, await typed replies (bounded)."""

from __future__ import annotations

import asyncio

from magnetar import protocol as proto

T = proto.pb.BaseCommand
REPLY_TIMEOUT_S = 10.0


class WirePeer:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = proto.FrameDecoder(proto.max_frame_bytes_for(proto.DEFAULT_MAX_MESSAGE_SIZE))
        self.frames: list[proto.Frame] = []

    @classmethod
    async def connect(cls, port: int) -> WirePeer:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        peer = cls(reader, writer)
        peer.send(proto.commands.connect("wire-test", 20))
        await peer.expect(T.CONNECTED)
        return peer

    def send(self, cmd: proto.pb.BaseCommand, entry: bytes | None = None) -> None:
        frame = proto.encode_command(cmd) if entry is None else proto.encode_payload_command(cmd, entry)
        self.writer.write(frame)

    async def next_frame(self) -> proto.Frame:
        async def read() -> proto.Frame:
            while True:
                if (frame := self.decoder.next_frame()) is not None:
                    return frame
                data = await self.reader.read(65536)
                if not data:
                    raise ConnectionError("broker closed the connection")
                self.decoder.feed(data)

        return await asyncio.wait_for(read(), REPLY_TIMEOUT_S)

    async def expect(self, *types: int) -> proto.Frame:
        """The next frame, skipping pings (answered); it must be of one of ``types``."""
        for _ in range(1000):
            frame = await self.next_frame()
            if frame.command.type == T.PING:
                self.send(proto.commands.pong())
                continue
            assert frame.command.type in types, f"expected {types}, got {frame.command}"
            return frame
        raise AssertionError("too many pings")

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()
