"""Failed logins with made-up method names (issue 36 item 11).

Each CONNECT with a new method name added a ``pulsar_authentication_failures_total`` series and a log line,
unauthenticated (3,000 attempts: 3,004 series). Unknown methods now share one label, and failures are
logged at most once per interval per series.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request

from magnetar import protocol as proto
from magnetar.server.auth.service import FAILURE_LOG_INTERVAL_S
from tests.abuse.conftest import HTTP_TIMEOUT_S
from tests.component.wire import T
from tests.integration.broker_process import BrokerProcess

ATTEMPTS = 300


async def refused(port: int, method: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(proto.encode_command(proto.commands.connect(auth_method_name=method, auth_data=b"x")))
        decoder = proto.FrameDecoder(1 << 20)
        async with asyncio.timeout(10):
            while (frame := decoder.next_frame()) is None:
                data = await reader.read(65536)
                assert data, "closed before answering"
                decoder.feed(data)
        assert frame.command.type == T.ERROR and frame.command.error.error == proto.pb.AuthenticationError
    finally:
        writer.close()


def scrape(proc: BrokerProcess) -> str:
    with urllib.request.urlopen(proc.web_url + "/metrics", timeout=HTTP_TIMEOUT_S) as response:
        return str(response.read().decode())


async def test_made_up_methods_add_no_series_and_few_log_lines(secure: BrokerProcess) -> None:
    before = secure.log_text().count("authentication failed from")
    started = time.monotonic()
    for i in range(ATTEMPTS):
        await refused(secure.port, f"made-up-{i}")
    metrics = await asyncio.to_thread(scrape, secure)
    series = [line for line in metrics.splitlines() if line.startswith("pulsar_authentication_failures_total{")]
    assert not any("made-up" in line for line in series), series
    assert [line for line in series if 'auth_method="unknown"' in line and "UNSUPPORTED_METHOD" in line]
    assert len(series) < 10, series
    logged = secure.log_text().count("authentication failed from") - before
    intervals = (time.monotonic() - started) / FAILURE_LOG_INTERVAL_S
    assert 1 <= logged <= intervals + 2, (logged, intervals)  # one line per interval (and series)
