"""One TCP connection to a broker: handshake, a reader task that frames and dispatches, keepalive.

The connection only frames and routes: responses go to the future of their ``request_id``,
receipts and messages to the producer or consumer registered under their id, and a broker's
CLOSE_PRODUCER / CLOSE_CONSUMER or a lost socket is reported to the handler, which decides how to
reconnect. Knows nothing of batching, acks or topics. All socket I/O of the client lives here.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
from collections.abc import Callable
from typing import Final, Protocol
from urllib.parse import urlsplit

from magnetar.client._config import ClientConfig
from magnetar.client.errors import (
    ConnectError,
    ConnectionClosed,
    OperationTimeout,
    PulsarClientError,
    from_server,
)
from magnetar.core.lifecycle import Lifecycle, Transitions
from magnetar.protocol import (
    DEFAULT_MAX_MESSAGE_SIZE,
    FrameDecoder,
    ProtocolError,
    commands,
    encode_command,
    encode_payload_command,
    pb,
    txn_commands,
)

__all__ = ["Connection", "ConsumerHandler", "ProducerHandler"]

log = logging.getLogger(__name__)
T: Final = pb.BaseCommand
READ_CHUNK_BYTES: Final = 256 * 1024
WRITE_BUFFER_HIGH_BYTES: Final = 4 * 1024 * 1024


class ProducerHandler(Protocol):
    def on_receipt(self, receipt: pb.CommandSendReceipt) -> None: ...
    def on_send_error(self, error: pb.CommandSendError) -> None: ...
    def on_disconnect(self, conn: Connection) -> None: ...


class ConsumerHandler(Protocol):
    def on_message(self, cmd: pb.CommandMessage, payload: memoryview) -> None: ...
    def on_active_change(self, active: bool) -> None: ...
    def on_disconnect(self, conn: Connection) -> None: ...


class ConnState(enum.Enum):
    INIT = "init"
    CONNECTING = "connecting"
    READY = "ready"
    CLOSED = "closed"


_EDGES: Final = Transitions(ConnState, {
    ConnState.INIT: frozenset({ConnState.CONNECTING, ConnState.CLOSED}),
    ConnState.CONNECTING: frozenset({ConnState.READY, ConnState.CLOSED}),
    ConnState.READY: frozenset({ConnState.CLOSED}),
    ConnState.CLOSED: frozenset(),
})

# Responses matched to a pending request: type -> (sub-message field, has request_id)
_RESPONSE_FIELDS: Final = {
    T.SUCCESS: "success",
    T.ERROR: "error",
    T.PRODUCER_SUCCESS: "producer_success",
    T.LOOKUP_RESPONSE: "lookupTopicResponse",
    T.PARTITIONED_METADATA_RESPONSE: "partitionMetadataResponse",
    T.GET_LAST_MESSAGE_ID_RESPONSE: "getLastMessageIdResponse",
    T.GET_TOPICS_OF_NAMESPACE_RESPONSE: "getTopicsOfNamespaceResponse",
    T.GET_SCHEMA_RESPONSE: "getSchemaResponse",
    T.ACK_RESPONSE: "ackResponse",
    **{response: field for response, field in txn_commands.RESPONSE_FIELDS.values()},
}
# responses that report failure in their own error/message fields instead of an ERROR frame
_OWN_ERROR_FIELD: Final = frozenset({T.ACK_RESPONSE, *(r for r, _ in txn_commands.RESPONSE_FIELDS.values())})


class Connection:
    """A handshaken connection; create with ``await Connection.open(url, config)``."""

    def __init__(self, url: str, config: ClientConfig) -> None:
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise ConnectError(f"cannot parse broker URL {url!r}")
        self.url = url
        self._host, self._port = parts.hostname, parts.port
        self._config = config
        self._life = Lifecycle(ConnState.INIT, _EDGES)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._decoder = FrameDecoder(config.max_frame_bytes)
        self._request_ids = itertools.count()
        self._pending: dict[int, asyncio.Future[pb.BaseCommand]] = {}
        self._unbounded: set[int] = set()  # requests told "keep waiting" (WaitForExclusive)
        self._producers: dict[int, ProducerHandler] = {}
        self._consumers: dict[int, ConsumerHandler] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._ping_pending = False
        self._closed = asyncio.Event()
        self.max_message_size = DEFAULT_MAX_MESSAGE_SIZE
        self.protocol_version = 0
        self._dispatch: dict[int, Callable[[pb.BaseCommand, memoryview | None], None]] = {
            T.SEND_RECEIPT: self._on_send_receipt,
            T.SEND_ERROR: self._on_send_error,
            T.MESSAGE: self._on_message,
            T.CLOSE_PRODUCER: self._on_close_producer,
            T.CLOSE_CONSUMER: self._on_close_consumer,
            T.ACTIVE_CONSUMER_CHANGE: self._on_active_change,
            T.PING: self._on_ping,
            T.PONG: lambda _c, _p: None,
            T.AUTH_CHALLENGE: self._on_auth_challenge,
        }

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def open(cls, url: str, config: ClientConfig) -> Connection:
        conn = cls(url, config)
        try:
            await asyncio.wait_for(conn._handshake(), config.connect_timeout_ms / 1000)
        except (OSError, TimeoutError, ProtocolError) as exc:
            conn._shutdown(exc)
            raise ConnectError(f"cannot connect to {url}: {exc!r}") from exc
        except BaseException as exc:
            conn._shutdown(exc)
            raise
        return conn

    async def _handshake(self) -> None:
        self._life.transition_to(ConnState.CONNECTING)
        self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        auth = self._config.authentication
        self._writer.write(encode_command(commands.connect(
            protocol_version=commands.PROTOCOL_VERSION,
            auth_method_name=auth.method if auth is not None else "none",
            auth_data=auth.auth_data() if auth is not None else None,
        )))
        while True:  # bounded by the caller's connect timeout
            data = await self._reader.read(READ_CHUNK_BYTES)
            if not data:
                raise ConnectError(f"{self.url} closed the connection during the handshake")
            self._decoder.feed(data)
            frame = self._decoder.next_frame()
            if frame is None:
                continue
            cmd = frame.command
            if cmd.type == T.ERROR:
                raise from_server(cmd.error.error, cmd.error.message)
            if cmd.type != T.CONNECTED:
                raise ConnectError(f"expected CONNECTED, got {T.Type.Name(cmd.type)}")
            self.protocol_version = cmd.connected.protocol_version
            if cmd.connected.HasField("max_message_size"):
                self.max_message_size = cmd.connected.max_message_size
            break
        self._life.transition_to(ConnState.READY)
        # frames that arrived right behind CONNECTED are dispatched by the read loop first
        self._tasks.append(asyncio.create_task(self._read_loop(), name=f"magnetar-conn-read {self.url}"))
        self._tasks.append(asyncio.create_task(self._keepalive(), name=f"magnetar-conn-ping {self.url}"))

    @property
    def is_ready(self) -> bool:
        return self._life.state is ConnState.READY

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def close(self) -> None:
        self._shutdown(ConnectionClosed(f"connection to {self.url} closed by the client"))
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _shutdown(self, exc: BaseException) -> None:
        if self._life.state is ConnState.CLOSED:
            return
        self._life.transition_to(ConnState.CLOSED)
        current = asyncio.current_task()
        for task in self._tasks:
            if task is not current:
                task.cancel()
        if self._writer is not None:
            self._writer.close()
        err = exc if isinstance(exc, PulsarClientError) else ConnectionClosed(f"{self.url}: {exc!r}")
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(err)
        self._pending.clear()
        handlers: list[ProducerHandler | ConsumerHandler] = [*self._producers.values(), *self._consumers.values()]
        self._producers.clear()
        self._consumers.clear()
        self._closed.set()
        for handler in handlers:
            handler.on_disconnect(self)

    # ------------------------------------------------------------ registration

    def register_producer(self, producer_id: int, handler: ProducerHandler) -> None:
        self._producers[producer_id] = handler

    def unregister_producer(self, producer_id: int) -> None:
        self._producers.pop(producer_id, None)

    def register_consumer(self, consumer_id: int, handler: ConsumerHandler) -> None:
        self._consumers[consumer_id] = handler

    def unregister_consumer(self, consumer_id: int) -> None:
        self._consumers.pop(consumer_id, None)

    # ------------------------------------------------------------ sending

    def send(self, cmd: pb.BaseCommand) -> None:
        self._write(encode_command(cmd))

    def send_payload(self, cmd: pb.BaseCommand, entry: bytes) -> None:
        self._write(encode_payload_command(cmd, entry))

    def _write(self, frame: bytes) -> None:
        if self._writer is None or self._life.state is not ConnState.READY:
            raise ConnectionClosed(f"connection to {self.url} is not ready")
        self._writer.write(frame)

    async def drain_if_congested(self) -> None:
        """Back-pressure: wait for the socket when more than WRITE_BUFFER_HIGH_BYTES are queued."""
        writer = self._writer
        if writer is not None and writer.transport.get_write_buffer_size() > WRITE_BUFFER_HIGH_BYTES:
            with contextlib.suppress(ConnectionError):
                await writer.drain()

    async def request(
        self, build: Callable[[int], pb.BaseCommand], *, timeout_ms: float | None = None
    ) -> pb.BaseCommand:
        """Send ``build(request_id)`` and wait for the matching response (ERROR raises)."""
        request_id = next(self._request_ids)
        fut: asyncio.Future[pb.BaseCommand] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        timeout_s = (self._config.operation_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            self.send(build(request_id))
            try:
                async with asyncio.timeout(timeout_s):  # one timer handle, no waiter task (wait_for makes both)
                    return await asyncio.shield(fut)
            except TimeoutError:
                if request_id in self._unbounded:
                    return await fut
                raise OperationTimeout(f"no answer from {self.url} within {timeout_s:.1f} s") from None
        finally:
            self._pending.pop(request_id, None)
            self._unbounded.discard(request_id)

    # ------------------------------------------------------------ reading

    async def _read_loop(self) -> None:
        assert self._reader is not None
        exc: BaseException = ConnectionClosed(f"{self.url} closed the connection")
        try:
            self._drain_decoder()
            while True:  # ends on EOF, error or cancellation
                data = await self._reader.read(READ_CHUNK_BYTES)
                if not data:
                    break
                self._ping_pending = False
                self._decoder.feed(data)
                self._drain_decoder()
        except asyncio.CancelledError:
            raise
        except (OSError, ProtocolError) as err:
            exc = err
        except Exception as err:  # a handler bug must not leave the connection half-alive
            log.exception("error while dispatching frames from %s", self.url)
            exc = err
        self._shutdown(exc)

    def _drain_decoder(self) -> None:
        while (frame := self._decoder.next_frame()) is not None:
            cmd = frame.command
            field = _RESPONSE_FIELDS.get(cmd.type)
            if field is not None:
                self._on_response(cmd, field)
                continue
            handler = self._dispatch.get(cmd.type)
            if handler is None:
                log.warning("ignoring unexpected %s from %s", T.Type.Name(cmd.type), self.url)
                continue
            handler(cmd, frame.payload)

    def _on_response(self, cmd: pb.BaseCommand, field: str) -> None:
        sub = getattr(cmd, field)
        request_id = sub.request_id
        if cmd.type == T.PRODUCER_SUCCESS and sub.HasField("producer_ready") and not sub.producer_ready:
            self._unbounded.add(request_id)
            return
        fut = self._pending.get(request_id)
        if fut is None or fut.done():
            return
        if cmd.type == T.ERROR:
            fut.set_exception(from_server(cmd.error.error, cmd.error.message))
        elif cmd.type in _OWN_ERROR_FIELD and sub.HasField("error"):
            fut.set_exception(from_server(sub.error, sub.message))
        else:
            fut.set_result(cmd)

    def _on_send_receipt(self, cmd: pb.BaseCommand, _: memoryview | None) -> None:
        handler = self._producers.get(cmd.send_receipt.producer_id)
        if handler is not None:
            handler.on_receipt(cmd.send_receipt)

    def _on_send_error(self, cmd: pb.BaseCommand, _: memoryview | None) -> None:
        handler = self._producers.get(cmd.send_error.producer_id)
        if handler is not None:
            handler.on_send_error(cmd.send_error)

    def _on_message(self, cmd: pb.BaseCommand, payload: memoryview | None) -> None:
        handler = self._consumers.get(cmd.message.consumer_id)
        if handler is not None and payload is not None:
            handler.on_message(cmd.message, payload)

    def _on_close_producer(self, cmd: pb.BaseCommand, _: memoryview | None) -> None:
        handler = self._producers.pop(cmd.close_producer.producer_id, None)
        if handler is not None:
            handler.on_disconnect(self)

    def _on_close_consumer(self, cmd: pb.BaseCommand, _: memoryview | None) -> None:
        handler = self._consumers.pop(cmd.close_consumer.consumer_id, None)
        if handler is not None:
            handler.on_disconnect(self)

    def _on_active_change(self, cmd: pb.BaseCommand, _: memoryview | None) -> None:
        handler = self._consumers.get(cmd.active_consumer_change.consumer_id)
        if handler is not None:
            handler.on_active_change(cmd.active_consumer_change.is_active)

    def _on_ping(self, _cmd: pb.BaseCommand, _p: memoryview | None) -> None:
        self.send(commands.pong())

    def _on_auth_challenge(self, _cmd: pb.BaseCommand, _p: memoryview | None) -> None:
        cmd = T(type=T.AUTH_RESPONSE)
        cmd.authResponse.client_version = commands.CLIENT_VERSION
        cmd.authResponse.protocol_version = commands.PROTOCOL_VERSION
        auth = self._config.authentication  # a refresh: a supplier hands fresh credentials
        cmd.authResponse.response.auth_method_name = auth.method if auth is not None else "none"
        cmd.authResponse.response.auth_data = auth.auth_data() if auth is not None else b""
        self.send(cmd)

    async def _keepalive(self) -> None:
        interval_s = self._config.keepalive_interval_ms / 1000
        while self._life.state is ConnState.READY:  # ends with the connection
            await asyncio.sleep(interval_s)
            if self._ping_pending:
                self._shutdown(ConnectionClosed(f"{self.url} did not answer a keepalive PING"))
                return
            self._ping_pending = True
            with contextlib.suppress(PulsarClientError):
                self.send(commands.ping())
