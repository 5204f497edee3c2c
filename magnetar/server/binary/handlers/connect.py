"""Session commands: CONNECT/CONNECTED (authenticated by :mod:`magnetar.server.auth`), AUTH_RESPONSE,
PING/PONG."""

from __future__ import annotations

from magnetar import __version__
from magnetar import protocol as proto
from magnetar.server.binary.session import Handler, Session

T = proto.pb.BaseCommand
SERVER_VERSION = f"magnetar {__version__}"
PROTOCOL_VERSION_MAX = 20
CLIENT_VERSION_CHARS_MAX = 256  # kept for stats; a longer one is cut


def on_connect(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    if not conn.awaiting_connect:
        raise proto.MalformedFrame("CONNECT received twice on one connection")
    c = cmd.connect
    version = max(0, min(c.protocol_version if c.HasField("protocol_version") else 0, PROTOCOL_VERSION_MAX))
    conn.auth.on_connect(conn, c)  # raises (after queuing ERROR) when the credentials are refused
    conn.handshake_done(c.client_version[:CLIENT_VERSION_CHARS_MAX], version)
    conn.send_frame(
        proto.encode_command(proto.commands.connected(SERVER_VERSION, version, conn.max_message_size))
    )


def on_auth_response(conn: Session, cmd: proto.pb.BaseCommand, _: memoryview | None) -> None:
    conn.auth.on_auth_response(conn, cmd.authResponse)


def on_ping(conn: Session, _cmd: proto.pb.BaseCommand, _p: memoryview | None) -> None:
    conn.send_frame(proto.encode_command(proto.commands.pong()))


def on_pong(_conn: Session, _cmd: proto.pb.BaseCommand, _p: memoryview | None) -> None:
    return None  # any frame already cleared the outstanding ping


HANDLERS: dict[int, Handler] = {
    T.CONNECT: on_connect, T.AUTH_RESPONSE: on_auth_response, T.PING: on_ping, T.PONG: on_pong,
}
