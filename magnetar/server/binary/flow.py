"""Output flow control for one connection: one budget for everything the broker writes to a peer.

A peer that sends requests and never reads its replies, or a consumer whose connection stalls, must not
make the broker buffer without bound. Three rules keep a connection's queued output near
``high_water_bytes``:

- the connection stops reading requests while its queued output is above the mark (the peer's own sends
  then back up in TCP);
- request handlers (lookups, topic lists, ...) start only while there is room, at most
  ``REQUESTS_RUNNING_MAX`` at a time, so their replies cannot pile up behind a stalled peer;
- dispatchers take a turn on the connection (``turn``) before reading entries for it: one read at a time
  per connection, and only while there is room, so N subscriptions on one stalled connection hold one
  read between them, not N. A Shared subscription with consumers on several connections waits for the
  turn of one of them and takes the others' only if free with room (``turn_if_free``): a read is for
  the consumers whose turns it holds, and a stalled connection never holds up the others.

The worst case is thus about ``high_water_bytes`` + one dispatch read + ``REQUESTS_RUNNING_MAX`` replies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

REQUESTS_RUNNING_MAX = 32  # request handlers running at once per connection (more wait their turn)


class OutputFlow:
    def __init__(self, writer: asyncio.StreamWriter, high_water_bytes: int, flush: Callable[[], None]) -> None:
        self._writer = writer
        self._flush = flush  # hands this loop turn's queued frames to the transport
        self.high_water_bytes = high_water_bytes
        # the transport pauses (and drain() waits) above the mark, resumes below a quarter of it
        writer.transport.set_write_buffer_limits(high=high_water_bytes, low=high_water_bytes // 4)
        self._turn = asyncio.Lock()
        self.running = asyncio.Semaphore(REQUESTS_RUNNING_MAX)
        self.queued_bytes = 0  # frames of this loop turn, not yet handed to the transport

    @property
    def buffered_bytes(self) -> int:
        return self._writer.transport.get_write_buffer_size() + self.queued_bytes

    def has_room(self) -> bool:
        return self.buffered_bytes <= self.high_water_bytes

    async def wait_room(self) -> None:
        """Return once the queued output is below the high-water mark (or the connection is closing)."""
        if self.has_room():
            return
        self._flush()
        while not self.has_room() and not self._writer.is_closing():
            try:
                await self._writer.drain()  # the transport is paused above the mark: wakes below a quarter
            except ConnectionError:
                return

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """One dispatcher at a time reads for this connection, and only while it has room."""
        async with self._turn:
            await self.wait_room()
            yield

    @contextlib.asynccontextmanager
    async def turn_if_free(self) -> AsyncIterator[bool]:
        """This connection's turn if nobody holds it and there is room now (True), else False; never waits
        (acquiring a free lock does not suspend)."""
        if self._turn.locked() or not self.has_room() or self._writer.is_closing():
            yield False
            return
        async with self._turn:
            yield True
