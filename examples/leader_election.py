"""Leader election with an exclusive producer (PIP-68), as the proposal describes it.

Every instance asks for a WaitForExclusive producer on one topic; the broker grants it to one instance at
a time and queues the others. The leader first catches up on the shared state by reading the topic from
the start and keeping the last value per key (what a compacted read returns), then applies its work and
publishes the new state. When it closes (or dies), the next instance in line becomes leader and sees
everything the previous leader wrote. No two leaders ever write at once, so no update is lost.

    python examples/leader_election.py --service-url pulsar://localhost:6650 --name worker-1 --rounds 3
"""

from __future__ import annotations

import argparse

import pulsar

STATE_TOPIC = "persistent://public/default/leader-election-state"
COUNTER_KEY = "counter"


def catch_up(client: pulsar.Client, topic: str) -> dict[str, bytes]:
    """The latest value of every key in the state topic."""
    state: dict[str, bytes] = {}
    reader = client.create_reader(topic, pulsar.MessageId.earliest)
    try:
        while reader.has_message_available():
            msg = reader.read_next(10_000)
            state[msg.partition_key()] = msg.data()
    finally:
        reader.close()
    return state


def run(service_url: str, name: str, rounds: int, topic: str = STATE_TOPIC) -> list[int]:
    """Wait to lead, then bump the shared counter ``rounds`` times; returns the values written."""
    client = pulsar.Client(service_url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        leader = client.create_producer(
            topic, producer_name=name, access_mode=pulsar.ProducerAccessMode.WaitForExclusive
        )
        print(f"{name}: leading", flush=True)
        counter = int(catch_up(client, topic).get(COUNTER_KEY, b"0"))
        written = []
        for _ in range(rounds):
            counter += 1
            leader.send(str(counter).encode(), partition_key=COUNTER_KEY, properties={"leader": name})
            written.append(counter)
        leader.close()
        print(f"{name}: wrote {written}", flush=True)
        return written
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--service-url", default="pulsar://localhost:6650")
    parser.add_argument("--name", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topic", default=STATE_TOPIC)
    args = parser.parse_args()
    run(args.service_url, args.name, args.rounds, args.topic)


if __name__ == "__main__":
    main()
