"""Topics and file descriptors (issue item 7): a client auto-creating topics, read-only GETs and a
namespace's topic count. The broker unloads topics idle for 1 s, keeps 8 sealed ledger files open
and allows 20 topics per namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pulsar
import pytest

from tests.abuse.conftest import assert_still_serving, http, open_fds, start_broker, unique
from tests.integration.broker_process import BrokerProcess
from tests.integration.conftest import make_client

TOPICS_PER_NAMESPACE = 20
NAMESPACES = 8  # 160 auto-created topics in all
FDS_ABOVE_IDLE_MAX = 40  # the old broker kept two or more files per topic it ever loaded
SETTLE_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = start_broker(
        tmp_path_factory, "brokerDeleteInactiveTopicsFrequencySeconds=1",
        "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds=1", "openFileLimit=8",
        f"maxTopicsPerNamespace={TOPICS_PER_NAMESPACE}",
    )
    try:
        yield proc
    finally:
        proc.kill()


def _settled_fds(proc: BrokerProcess, ceiling: int) -> int:
    """Open descriptors once they fall to ``ceiling`` or SETTLE_S passes (bounded polling of /proc)."""
    proc.wait_until(lambda: open_fds(proc) <= ceiling, SETTLE_S)
    return open_fds(proc)


def test_auto_created_topics_release_their_files(broker: BrokerProcess) -> None:
    idle = open_fds(broker)
    client = make_client(broker.url)
    try:
        for _ in range(NAMESPACES):
            namespace = f"public/{unique('auto')}"
            assert http(broker, "PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
            for i in range(TOPICS_PER_NAMESPACE):
                producer = client.create_producer(f"persistent://{namespace}/t{i}")
                producer.send(b"x")
                producer.close()
    finally:
        client.close()
    fds = _settled_fds(broker, idle + FDS_ABOVE_IDLE_MAX)
    assert fds <= idle + FDS_ABOVE_IDLE_MAX, f"{fds} descriptors open, {idle} when idle"
    assert broker.wait_for_log("unloaded topic", 5.0)
    assert_still_serving(broker)  # and an unloaded topic loads again with its messages:
    reader_client = make_client(broker.url)
    try:
        last_ns = [line for line in broker.log_lines if "creating topic persistent://public/auto-" in line][-1]
        topic = last_ns.split("creating topic ", 1)[1].strip()
        reader = reader_client.create_reader(topic, pulsar.MessageId.earliest)
        assert reader.read_next(10_000).data() == b"x"
    finally:
        reader_client.close()


def namespace_with_topics(broker: BrokerProcess, prefix: str, topics: int) -> str:
    """A new namespace ``public/<prefix>-...`` holding non-partitioned topics t0..t<topics-1>."""
    namespace = f"public/{unique(prefix)}"
    assert http(broker, "PUT", f"/admin/v2/namespaces/{namespace}")[0] == 204
    for i in range(topics):
        assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/t{i}")[0] == 204
    return namespace


def test_a_namespace_holds_at_most_max_topics(broker: BrokerProcess) -> None:
    """Declared partitions count one each, written to or not; over the limit the admin API answers 412 and
    auto-creation NotAllowedError, as Pulsar does."""
    namespace = namespace_with_topics(broker, "quota", TOPICS_PER_NAMESPACE - 5)
    over = (412, {"reason": "Exceed maximum number of topics in namespace."})
    assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/p/partitions", 6) == over
    assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/p/partitions", 3)[0] == 204  # 18 of 20
    client = make_client(broker.url)
    try:
        client.create_producer(f"persistent://{namespace}/auto-ok-1")
        assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/q/partitions", 2) == over
        assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/t-last")[0] == 204  # the 20th
        assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/t-over") == over
        with pytest.raises(pulsar.NotAllowedError):
            client.create_producer(f"persistent://{namespace}/one-too-many")
        with pytest.raises(pulsar.NotAllowedError):
            client.subscribe(f"persistent://{namespace}/one-too-many", "s")
        client.create_producer(f"persistent://{namespace}/p")  # existing partitions still serve
    finally:
        client.close()
    assert len(http(broker, "GET", f"/admin/v2/namespaces/{namespace}/topics")[1]) == TOPICS_PER_NAMESPACE


def test_concurrent_creations_cannot_overshoot_max_topics(broker: BrokerProcess) -> None:
    """The count and the creation are one step: 20 creations at once with room for 5 leave exactly 20 topics."""
    namespace = namespace_with_topics(broker, "quota-race", TOPICS_PER_NAMESPACE - 5)
    paths = [f"/admin/v2/persistent/{namespace}/racer{i}" + ("/partitions" if i % 2 else "") for i in range(20)]
    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        statuses = list(pool.map(lambda path: http(broker, "PUT", path, 1 if path.endswith("s") else None)[0], paths))
    assert sorted(set(statuses)) == [204, 412] and statuses.count(204) == 5, statuses
    assert len(http(broker, "GET", f"/admin/v2/namespaces/{namespace}/topics")[1]) == TOPICS_PER_NAMESPACE


def test_system_topics_do_not_count_against_max_topics(broker: BrokerProcess) -> None:
    namespace = namespace_with_topics(broker, "quota-system", TOPICS_PER_NAMESPACE - 1)
    assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/__transaction_buffer_snapshot")[0] == 204
    assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/t-last")[0] == 204  # the 20th counted
    assert http(broker, "PUT", f"/admin/v2/persistent/{namespace}/t-over")[0] == 412


def test_open_file_limit_above_the_descriptor_limit_is_lowered_and_said(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Issue 36 item 13: openFileLimit is capped below RLIMIT_NOFILE (headroom for sockets), in the log."""
    proc = start_broker(tmp_path_factory, "openFileLimit=100000000")
    try:
        assert proc.wait_for_log("openFileLimit=100000000 lowered to", 10)
        assert_still_serving(proc)
    finally:
        proc.kill()
