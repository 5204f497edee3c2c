"""The ``magnetar perf`` command line: argparse for produce / consume / e2e, and one validated options value.

Flag names follow ``pulsar-perf`` where it has one (``--rate``, ``--size``, ``--num-topics``,
``--num-producers``, ``--batch-max-messages``, ``--compression``, ``--test-duration``), spelled the argparse
way. The options value is what the drivers read; it knows nothing of clients.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace
from typing import Any, Final, Literal

Verb = Literal["produce", "consume", "e2e"]
VERBS: Final = ("produce", "consume", "e2e")
CLIENTS: Final = ("official", "magnetar")
COMPRESSIONS: Final = ("none", "lz4", "zlib", "zstd", "snappy")
SUBSCRIPTION_TYPES: Final = ("exclusive", "shared", "failover", "key_shared")
ACK_MODES: Final = ("individual", "cumulative", "none")
TOPICS_MAX = 100_000
CLIENTS_PER_TOPIC_MAX = 1_000
PENDING_MAX = 1_000_000
PROCESSES_MAX = 64


class OptionsError(ValueError):
    """A flag combination that cannot run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PerfOptions:
    verb: Verb
    service_url: str
    admin_url: str
    client: str
    topic: str
    num_topics: int
    partitions: int
    num_producers: int
    num_consumers: int
    rate_per_s: float
    size_bytes: int
    messages: int  # 0: no count limit
    duration_s: float  # 0: no time limit
    batching: bool
    batch_max_messages: int
    batch_max_bytes: int
    batch_delay_ms: float
    compression: str
    max_pending: int
    subscription: str
    subscription_type: str
    initial_position: str
    receiver_queue_size: int
    ack_mode: str
    io_threads: int
    json: bool
    progress: bool
    warmup_messages: int
    sample_every: int
    processes: int = 1  # client processes, each with its own client; results merged
    process_index: int = 0  # which of them this is (a child's options only)
    broker_pid: int = 0  # a broker on this machine whose CPU (/proc) is reported per message; 0: none

    def __post_init__(self) -> None:
        checks = [
            (self.service_url.startswith("pulsar://") or (
                self.client == "official" and self.service_url.startswith(("http://", "https://"))),
             f"--service-url must be pulsar:// (or http(s):// with the official client), got {self.service_url}"),
            (1 <= self.num_topics <= TOPICS_MAX, f"--num-topics must be within 1..{TOPICS_MAX}"),
            (0 <= self.partitions <= 10_000, "--partitions must be within 0..10000"),
            (1 <= self.num_producers <= CLIENTS_PER_TOPIC_MAX, "--num-producers must be >= 1"),
            (1 <= self.num_consumers <= CLIENTS_PER_TOPIC_MAX, "--num-consumers must be >= 1"),
            (self.rate_per_s >= 0, "--rate must be >= 0 (0: as fast as possible)"),
            (self.size_bytes >= 1, "--size must be >= 1"),
            (self.messages >= 0 and self.duration_s >= 0, "--messages and --test-duration must be >= 0"),
            (1 <= self.max_pending <= PENDING_MAX, f"--max-pending must be within 1..{PENDING_MAX}"),
            (self.batch_max_messages >= 1 and self.batch_max_bytes >= 1, "batch limits must be >= 1"),
            (self.batch_delay_ms >= 0, "--batch-delay-ms must be >= 0"),
            (self.receiver_queue_size >= 1, "--receiver-queue-size must be >= 1"),
            (self.io_threads >= 1, "--io-threads must be >= 1"),
            (self.warmup_messages >= 0, "--warmup-messages must be >= 0"),
            (1 <= self.sample_every <= 1_000_000, "--sample-every must be within 1..1000000"),
            (not (self.ack_mode == "cumulative" and self.subscription_type in ("shared", "key_shared")),
             "cumulative acks need an exclusive or failover subscription"),
            (1 <= self.processes <= PROCESSES_MAX, f"--processes must be within 1..{PROCESSES_MAX}"),
            (self.verb == "produce" or self.processes == 1 or self.num_topics >= self.processes
             or self.subscription_type in ("shared", "key_shared"),
             "--processes N with consumers needs -t >= N (topics are split between the processes) "
             "or a shared / key_shared subscription"),
        ]
        for ok, message in checks:
            if not ok:
                raise OptionsError(message)

    def topic_names(self) -> list[str]:
        """The topics this run uses: ``topic`` itself, or ``topic-0`` .. ``topic-N-1``.

        With several processes and at least as many topics, each process takes every N-th topic."""
        if self.num_topics == 1:
            return [self.topic]
        names = [f"{self.topic}-{i}" for i in range(self.num_topics)]
        if 1 < self.processes <= self.num_topics:
            return names[self.process_index::self.processes]
        return names

    def all_topic_names(self) -> list[str]:
        """Every topic of the run, whichever process this is (partitions are created for all)."""
        return replace(self, processes=1, process_index=0).topic_names()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive_int(text: str) -> int:
    value = int(text.replace("_", ""))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def _lower_choice(text: str) -> str:
    """Pulsar's spellings (``Key_Shared``, ``Earliest``) and ours (``key_shared``) alike."""
    return text.strip().lower()


def _first_name(text: str) -> str:
    """pulsar-perf's ``-ss sub1,sub2`` lists subscriptions; one subscription is measured here: the first."""
    return text.split(",")[0].strip()


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("topic", nargs="?", default="persistent://public/default/perf", help="topic (or name prefix)")
    p.add_argument("-u", "--service-url", default="pulsar://localhost:6650", help="broker URL")
    p.add_argument("--admin-url", default="http://localhost:8080", help="admin HTTP API (for --partitions)")
    p.add_argument("--client", choices=CLIENTS, default="official", help="official pulsar-client or magnetar.client")
    p.add_argument("-t", "--num-topics", type=_positive_int, default=1, help="number of topics")
    p.add_argument("--partitions", type=_positive_int, default=0, help="create each topic with N partitions")
    p.add_argument("-m", "--messages", "--num-messages", type=_positive_int, default=0,
                   help="stop after N messages (0: no limit)")
    p.add_argument("-time", "--test-duration", dest="duration_s", type=float, default=0.0,
                   help="stop after S seconds (0: no limit; Ctrl-C stops cleanly)")
    p.add_argument("--io-threads", type=_positive_int, default=1, help="official client I/O threads")
    p.add_argument("--processes", type=_positive_int, default=1,
                   help="client processes, each its own client with a share of the messages, rate and topics; "
                        "totals and latency percentiles are merged")
    p.add_argument("--broker-pid", type=_positive_int, default=0,
                   help="PID of the broker (on this machine): report its CPU per message from /proc")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no per-second line on stderr")


def _producing(p: argparse.ArgumentParser) -> None:
    p.add_argument("-n", "--num-producers", type=_positive_int, default=1, help="producers per topic")
    p.add_argument("-r", "--rate", dest="rate_per_s", type=float, default=0.0, help="msg/s in total (0: max)")
    p.add_argument("-s", "--size", dest="size_bytes", type=_positive_int, default=1024, help="message bytes")
    p.add_argument("--batching", action=argparse.BooleanOptionalAction, default=True, help="batch messages")
    p.add_argument("-db", "--disable-batching", dest="batching", action="store_false",
                   help="same as --no-batching (pulsar-perf's flag)")
    p.add_argument("-bm", "--batch-max-messages", type=_positive_int, default=1000, help="messages per batch")
    p.add_argument("-bb", "--batch-max-bytes", type=_positive_int, default=128 * 1024, help="bytes per batch")
    p.add_argument("-b", "--batch-delay-ms", "--batch-time-window", type=float, default=1.0,
                   help="max publish delay of a batch, ms")
    p.add_argument("-z", "--compression", choices=COMPRESSIONS, default="none", help="compression type")
    p.add_argument("-o", "--max-pending", type=_positive_int, default=1000, help="pending sends per producer")
    p.add_argument("--warmup-messages", type=_positive_int, default=0, help="sent before measuring starts")
    p.add_argument("--sample-every", type=_positive_int, default=1,
                   help="time one send in N (each official-client callback costs a GIL hand-off); counts stay exact")


def _consuming(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--num-consumers", type=_positive_int, default=1, help="consumers per topic")
    p.add_argument("-S", "-ss", "--subscription", "--subscriptions", dest="subscription", type=_first_name,
                   default="perf-sub", help="subscription name (of a comma list, the first)")
    p.add_argument("-st", "--subscription-type", type=_lower_choice, choices=SUBSCRIPTION_TYPES,
                   default="exclusive", help="Exclusive, Shared, Failover or Key_Shared (any case)")
    p.add_argument("-sp", "--initial-position", "--subscription-position", dest="initial_position",
                   type=_lower_choice, choices=("earliest", "latest"), default="latest",
                   help="where a new subscription starts (Earliest or Latest, any case)")
    p.add_argument("-q", "--receiver-queue-size", type=_positive_int, default=1000, help="consumer queue size")
    p.add_argument("--ack-mode", choices=ACK_MODES, default="individual", help="how consumers acknowledge")


def add_perf_parser(verbs: Any) -> argparse.ArgumentParser:
    """Add ``perf produce|consume|e2e`` to the CLI's sub-parsers."""
    perf: argparse.ArgumentParser = verbs.add_parser("perf", help="measure throughput and latency (like pulsar-perf)")
    kinds = perf.add_subparsers(dest="perf_verb", required=True)
    fmt = argparse.ArgumentDefaultsHelpFormatter
    produce = kinds.add_parser("produce", help="publish at a rate (or max) and report publish latency",
                               formatter_class=fmt)
    consume = kinds.add_parser("consume", help="consume and report throughput and end-to-end latency",
                               formatter_class=fmt)
    e2e = kinds.add_parser("e2e", help="produce and consume at once and report end-to-end latency",
                           formatter_class=fmt)
    for parser, roles in ((produce, (_producing,)), (consume, (_consuming,)), (e2e, (_producing, _consuming))):
        _common(parser)
        for role in roles:
            role(parser)
    from magnetar.perf._txn import add_txn_parser

    add_txn_parser(kinds, fmt)
    return perf


def options_from(args: argparse.Namespace) -> PerfOptions:
    """Build the validated options value from parsed flags (defaults fill the other verb's flags)."""
    values = vars(args)
    return PerfOptions(
        verb=values["perf_verb"],
        service_url=values["service_url"],
        admin_url=values["admin_url"],
        client=values["client"],
        topic=values["topic"],
        num_topics=values["num_topics"],
        partitions=values["partitions"],
        num_producers=values.get("num_producers", 1),
        num_consumers=values.get("num_consumers", 1),
        rate_per_s=values.get("rate_per_s", 0.0),
        size_bytes=values.get("size_bytes", 1024),
        messages=values["messages"],
        duration_s=values["duration_s"],
        batching=values.get("batching", True),
        batch_max_messages=values.get("batch_max_messages", 1000),
        batch_max_bytes=values.get("batch_max_bytes", 128 * 1024),
        batch_delay_ms=values.get("batch_delay_ms", 1.0),
        compression=values.get("compression", "none"),
        max_pending=values.get("max_pending", 1000),
        subscription=values.get("subscription", "perf-sub"),
        subscription_type=values.get("subscription_type", "exclusive"),
        initial_position=values.get("initial_position", "latest"),
        receiver_queue_size=values.get("receiver_queue_size", 1000),
        ack_mode=values.get("ack_mode", "individual"),
        io_threads=values["io_threads"],
        json=values["json"],
        progress=values["progress"],
        warmup_messages=values.get("warmup_messages", 0),
        sample_every=values.get("sample_every", 1),
        processes=values.get("processes", 1),
        broker_pid=values.get("broker_pid", 0),
    )
