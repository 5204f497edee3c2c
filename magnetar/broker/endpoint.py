"""What the broker needs from a client connection, without knowing it is a socket.

The server implements :class:`Endpoint` for each connection; producers, consumers and dispatchers
write encoded frames through it and wait for the peer to drain. Tests implement it in memory.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol


class Endpoint(Protocol):
    @property
    def remote_address(self) -> str: ...

    @property
    def client_version(self) -> str: ...

    @property
    def protocol_version(self) -> int: ...

    @property
    def connected_since_ms(self) -> int: ...

    @property
    def is_open(self) -> bool: ...

    def send_frame(self, frame: bytes) -> None:
        """Queue an encoded frame for the peer (never blocks; frames leave in call order)."""
        ...

    def send_frame_parts(self, head: bytes, payload: bytes) -> None:
        """Queue one frame given as its head and its payload, without joining them (no copy of the payload)."""
        ...

    def forget_producer(self, producer_id: int) -> None:
        """The broker closed this producer (e.g. fenced): drop it from the connection's table."""
        ...

    def forget_consumer(self, consumer_id: int) -> None:
        """The broker closed this consumer (e.g. after a seek): drop it from the connection's table."""
        ...

    async def drain(self) -> None:
        """Wait until the queued frames are below the connection's high-water mark."""
        ...

    def has_output_room(self) -> bool:
        """The queued output is below the high-water mark: more may be sent to this peer now."""
        ...

    def output_turn(self) -> AbstractAsyncContextManager[None]:
        """Hold this connection's dispatch turn: one dispatch read at a time, only while there is room."""
        ...

    def output_turn_if_free(self) -> AbstractAsyncContextManager[bool]:
        """This connection's dispatch turn if it is free and has room now (True); never waits (False)."""
        ...
