"""One client connection: frames in, handlers dispatched through a table, frames out.

The connection owns its lifecycle (awaiting CONNECT → ready → closed), keep-alive, back-pressure on
publishes, and the producers and consumers it created, which it detaches when it ends. It does no
protocol work itself: the sans-IO codec decodes, the handlers in ``handlers/`` act. Bad bytes from the
peer cost only this connection; nothing a client sends can raise out of here.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable

from magnetar import protocol as proto
from magnetar.broker.errors import BrokerError, NotAllowed, TooManyRequests
from magnetar.broker.parts import Broker
from magnetar.broker.subscription.consumer import Consumer
from magnetar.broker.topic.producer import Producer
from magnetar.broker.transactions.api import TxnId
from magnetar.core.clock import Clock
from magnetar.core.lifecycle import Transitions
from magnetar.core.logs import RateLimitedLog
from magnetar.server.auth import ConnectionAuth, SecurityContext
from magnetar.server.binary.flow import OutputFlow
from magnetar.server.binary.session import Handler

log = logging.getLogger("magnetar.server.connection")
_unsupported_log = RateLimitedLog(log, interval_s=10.0)  # a peer must not be able to fill the log
_protocol_error_log = RateLimitedLog(log, interval_s=1.0)

READ_CHUNK_BYTES = 256 * 1024
REQUESTS_IN_FLIGHT_MAX = 1024  # request handlers accepted per connection (REQUESTS_RUNNING_MAX run at once)
UNGATED_REQUESTS = frozenset({proto.pb.BaseCommand.PRODUCER, proto.pb.BaseCommand.SUBSCRIBE})  # may wait long
OUT_FRAMES_MAX = 1024  # frames coalesced before a write is forced (they go out at the end of the loop turn)


class State(enum.Enum):
    AWAITING_CONNECT = "awaiting-connect"
    READY = "ready"
    CLOSED = "closed"


CONNECTION_TRANSITIONS = Transitions(State, {
    State.AWAITING_CONNECT: {State.READY, State.CLOSED},
    State.READY: {State.CLOSED},
    State.CLOSED: set(),
})


class ServerConnection:
    """Implements the handlers' Session (and so the broker's Endpoint) for one TCP connection."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        broker: Broker,
        handlers: dict[int, Handler],
        clock: Clock,
        security: SecurityContext | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.broker = broker
        self._handlers = handlers
        self.clock = clock
        self.state = State.AWAITING_CONNECT
        peer = writer.get_extra_info("peername")
        self._remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.local_address: tuple[str, int] = writer.get_extra_info("sockname")[:2]
        self._client_version = ""
        self._protocol_version = 0
        self._connected_since_ms = clock.now_ms()
        self.max_message_size = broker.config.max_message_size
        self._decoder = proto.FrameDecoder(proto.max_frame_bytes_for(self.max_message_size))
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self.open_txns: set[TxnId] = set()  # opened here, maybe still open (maxOpenTransactionsPerConnection)
        self._requests: set[asyncio.Task[None]] = set()
        self._received_since_tick = False
        self._ping_outstanding = False
        self.publishes_in_flight = 0
        self._publish_room = asyncio.Event()
        self._publish_room.set()
        self._out: list[bytes] = []  # frames of this loop turn, written together by _flush_out
        self._loop = asyncio.get_running_loop()
        self.auth = ConnectionAuth(security, writer.get_extra_info("ssl_object"))  # role, refresh, permissions
        self._flow = OutputFlow(writer, broker.config.connection_output_high_water_bytes, self._flush_out)

    # ---- Endpoint -------------------------------------------------------------------------------------

    @property
    def remote_address(self) -> str:
        return self._remote

    @property
    def client_version(self) -> str:
        return self._client_version

    @property
    def protocol_version(self) -> int:
        return self._protocol_version

    @property
    def connected_since_ms(self) -> int:
        return self._connected_since_ms

    @property
    def is_open(self) -> bool:
        return self.state is not State.CLOSED and not self._writer.is_closing()

    def send_frame(self, frame: bytes) -> None:
        """Queue ``frame``; every frame of this loop turn goes out in one write (one syscall, not one each)."""
        if not self.is_open:
            return
        self._out.append(frame)
        self._flow.queued_bytes += len(frame)
        if len(self._out) == 1:
            self._loop.call_soon(self._flush_out)
        elif len(self._out) >= OUT_FRAMES_MAX:
            self._flush_out()

    def send_frame_parts(self, head: bytes, payload: bytes) -> None:
        """Like ``send_frame(head + payload)`` without the copy: the two leave together in one writev."""
        if not self.is_open:
            return
        if not self._out:
            self._loop.call_soon(self._flush_out)
        self._out += (head, payload)
        self._flow.queued_bytes += len(head) + len(payload)
        if len(self._out) >= OUT_FRAMES_MAX:
            self._flush_out()

    def _flush_out(self) -> None:
        if not self._out:
            return
        frames, self._out = self._out, []
        self._flow.queued_bytes = 0
        if self.is_open:
            self._writer.writelines(frames)

    def forget_producer(self, producer_id: int) -> None:
        self.producers.pop(producer_id, None)

    def forget_consumer(self, consumer_id: int) -> None:
        self.consumers.pop(consumer_id, None)

    async def drain(self) -> None:
        if self.is_open:
            await self._flow.wait_room()

    def has_output_room(self) -> bool:
        return self._flow.has_room()

    def output_turn(self) -> contextlib.AbstractAsyncContextManager[None]:
        return self._flow.turn()

    def output_turn_if_free(self) -> contextlib.AbstractAsyncContextManager[bool]:
        return self._flow.turn_if_free()

    # ---- lifecycle ------------------------------------------------------------------------------------

    def transition_to(self, new: State) -> None:
        self.state = CONNECTION_TRANSITIONS.check(self.state, new, f"connection from {self._remote}")

    @property
    def awaiting_connect(self) -> bool:
        return self.state is State.AWAITING_CONNECT

    def handshake_done(self, client_version: str, protocol_version: int) -> None:
        self._client_version = client_version
        self._protocol_version = protocol_version
        self.transition_to(State.READY)

    async def run(self) -> None:
        keepalive = asyncio.get_running_loop().create_task(self._keepalive())
        handshake_timer = self._loop.call_later(
            self.broker.config.connect_handshake_timeout_seconds, self._handshake_expired)
        try:
            await self._read_loop()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except proto.PeerProtocolError as exc:
            _protocol_error_log.warning("closing connection from %s: %s", self._remote, exc)
        except Exception:
            log.exception("closing connection from %s after an internal error", self._remote)
        finally:
            keepalive.cancel()
            handshake_timer.cancel()
            await self.close()

    def _handshake_expired(self) -> None:
        if self.state is State.AWAITING_CONNECT:
            log.info("closing connection from %s: no CONNECT within %s s", self._remote,
                     self.broker.config.connect_handshake_timeout_seconds)
            self._writer.close()

    async def _read_loop(self) -> None:
        while self.state is not State.CLOSED:
            if not self._publish_room.is_set():
                await self._publish_room.wait()
            await self._flow.wait_room()  # a peer that does not read its replies stops being read
            data = await self._reader.read(READ_CHUNK_BYTES)
            if not data:
                return
            self._received_since_tick = True
            self._ping_outstanding = False
            self._decoder.feed(data)
            while (frame := self._decoder.next_frame()) is not None:
                self._dispatch(frame)
                if not self.is_open:
                    return

    def _dispatch(self, frame: proto.Frame) -> None:
        cmd = frame.command
        if self.state is State.AWAITING_CONNECT and cmd.type != proto.pb.BaseCommand.CONNECT:
            raise proto.MalformedFrame(f"expected CONNECT as the first command, got type {cmd.type}")
        handler = self._handlers.get(cmd.type)
        if handler is None:
            self._unsupported(cmd)
            return
        result = handler(self, cmd, frame.payload)
        if result is not None:
            self._spawn(result, cmd)

    def _spawn(self, work: Awaitable[None], cmd: proto.pb.BaseCommand) -> None:
        if len(self._requests) >= REQUESTS_IN_FLIGHT_MAX:
            refusal = TooManyRequests("Too many requests in flight on this connection")  # retried by clients
            self.reply_error(request_id_of(cmd), refusal, cmd)
            if asyncio.iscoroutine(work):
                work.close()
            return
        task = asyncio.ensure_future(self._guard(work, cmd))
        self._requests.add(task)
        task.add_done_callback(self._requests.discard)

    async def _guard(self, work: Awaitable[None], cmd: proto.pb.BaseCommand) -> None:
        try:
            if cmd.type in UNGATED_REQUESTS:
                await work
            else:
                async with self._flow.running:  # replies start only while the peer reads them
                    await self._flow.wait_room()
                    await work
        except BrokerError as exc:
            self.reply_error(request_id_of(cmd), exc, cmd)
        except Exception as exc:
            log.exception("request of type %s from %s failed", cmd.type, self._remote)
            self.reply_error(request_id_of(cmd), BrokerError(f"internal error: {type(exc).__name__}"), cmd)

    def _unsupported(self, cmd: proto.pb.BaseCommand) -> None:
        request_id = request_id_of(cmd)
        _unsupported_log.info("unsupported command type %s from %s", cmd.type, self._remote)
        if request_id is not None:
            self.reply_error(request_id, NotAllowed(f"command type {cmd.type} is not supported by magnetar"))

    def reply_error(self, request_id: int | None, exc: BrokerError, cmd: proto.pb.BaseCommand | None = None) -> None:
        if request_id is None:
            return
        code, text = getattr(exc, "server_error", proto.ServerErrorCode.UnknownError), str(exc) or type(exc).__name__
        reply = proto.commands.error(request_id, code, text) if cmd is None else proto.commands.failure_for(
            cmd, request_id, code, text)
        self.send_frame(proto.encode_command(reply))

    def publish_started(self) -> None:
        self.publishes_in_flight += 1
        if self.publishes_in_flight >= self.broker.config.max_pending_publish_requests_per_connection:
            self._publish_room.clear()

    def publish_finished(self, _: object = None) -> None:
        self.publishes_in_flight -= 1
        if self.publishes_in_flight < self.broker.config.max_pending_publish_requests_per_connection:
            self._publish_room.set()

    async def _keepalive(self) -> None:
        interval_s = self.broker.config.keep_alive_interval_seconds
        while self.is_open:
            await asyncio.sleep(interval_s)
            if self._received_since_tick:
                self._received_since_tick = False
                continue
            if self._ping_outstanding:
                log.info("closing connection from %s: no answer to keep-alive ping", self._remote)
                self._out.clear()
                self._writer.close()
                return
            if self.state is State.READY:
                self._ping_outstanding = True
                self.send_frame(proto.encode_command(proto.commands.ping()))

    async def detach_producer(self, producer: Producer) -> None:
        self.producers.pop(producer.producer_id, None)
        topic = self.broker.registry.loaded.get(producer.topic_name)
        if topic is not None:
            topic.remove_producer(producer)

    async def detach_consumer(self, consumer: Consumer) -> None:
        self.consumers.pop(consumer.consumer_id, None)
        topic = self.broker.registry.loaded.get(consumer.topic_name)
        if topic is not None:
            await topic.remove_consumer(consumer)

    async def close(self) -> None:
        """Detach every producer and consumer, then close the socket (idempotent)."""
        if self.state is State.CLOSED:
            return
        self._flush_out()  # what was answered before the close still goes out
        self.transition_to(State.CLOSED)
        self.auth.close()
        for task in list(self._requests):
            task.cancel()
        for producer in list(self.producers.values()):
            await self.detach_producer(producer)
        for consumer in list(self.consumers.values()):
            await self.detach_consumer(consumer)
        self.producers.clear()
        self.consumers.clear()
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()


# BaseCommand's sub-message field number equals the command type (facts §0)
_FIELD_BY_TYPE = {f.number: f.name for f in proto.pb.BaseCommand.DESCRIPTOR.fields if f.number != 1}


def request_id_of(cmd: proto.pb.BaseCommand) -> int | None:
    """The request id of a command, if its sub-message has one."""
    name = _FIELD_BY_TYPE.get(cmd.type)
    if name is None or not cmd.HasField(name):  # type: ignore[arg-type]
        return None
    sub = getattr(cmd, name)
    if "request_id" in sub.DESCRIPTOR.fields_by_name and sub.HasField("request_id"):
        return int(sub.request_id)
    return None

