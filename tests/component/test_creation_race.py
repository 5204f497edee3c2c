"""Two brokers over one metadata store race to create the same name as a plain and as a partitioned topic
(issue #24, "one decision per name"): at most one of them may win, whatever the interleaving.

Within one broker a per-name lock decides; across brokers the decision goes through the metadata store:
both creations are create-if-absent writes, and each re-checks the other's record after writing.
"""

from __future__ import annotations

import asyncio

from magnetar.app.standalone import Standalone
from magnetar.broker.errors import BrokerError
from magnetar.broker.names import TopicName
from tests.sim.world import let_turns_pass

TRIES = 30


async def _plain(sa: Standalone, topic: TopicName) -> bool:
    try:
        await sa.broker.registry.get(topic, create=True)
    except BrokerError:
        return False
    return True


async def _partitioned(sa: Standalone, topic: TopicName, turns_later: int) -> bool:
    await let_turns_pass(turns_later)
    try:
        return await sa.broker.catalog.create_partitioned_topic(topic, 2)
    except BrokerError:
        return False


async def test_a_name_is_never_both_plain_and_partitioned_across_brokers(
    two_brokers: tuple[Standalone, Standalone],
) -> None:
    a, b = two_brokers
    outcomes = []
    for i in range(TRIES):
        topic = TopicName.parse(f"persistent://public/default/race-{i}")
        plain_on, partitioned_on = (a, b) if i % 2 else (b, a)
        head_start = i // 2  # loop turns the plain creation runs alone: every interleaving of the two
        won = await asyncio.gather(_plain(plain_on, topic), _partitioned(partitioned_on, topic, head_start))
        assert not all(won), f"{topic}: both the plain and the partitioned creation succeeded"
        plain = await a.broker.ledgers.exists(topic.managed_ledger_name)
        partitioned = await a.broker.catalog.partition_count(topic) > 0
        assert not (plain and partitioned), f"{topic} is both plain and partitioned"
        outcomes.append(won)
    assert any(any(won) for won in outcomes)  # the race is not decided by refusing everything
