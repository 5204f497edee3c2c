"""What ``magnetar perf`` prints: one progress line a second (stderr), a summary table or JSON (stdout).

Pure formatting over ``Interval`` values: no clocks, no clients, so tests check the shapes directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from magnetar.perf._options import PerfOptions
from magnetar.perf._recorder import Interval

JSON_SCHEMA_VERSION = 1


def progress_line(elapsed_s: float, intervals: Sequence[Interval], *, label: str = "") -> str:
    """``[  3.0s] publish 12,345 msg/s 12.6 MB/s p50 1.20 p99 3.40 p999 5.00 ms | consume ...``"""
    parts = [
        f"{i.name} {i.msg_per_s:,.0f} msg/s {i.mb_per_s:.1f} MB/s p50 {i.latency.p50_ms:.2f} "
        f"p99 {i.latency.p99_ms:.2f} p999 {i.latency.p999_ms:.2f} ms" + (f" errors {i.errors}" if i.errors else "")
        for i in intervals
    ]
    stamp = f"{label} {elapsed_s:.1f}s" if label else f"{elapsed_s:6.1f}s"
    return f"[{stamp}] " + " | ".join(parts)


def describe(options: PerfOptions) -> str:
    topics = f"{options.num_topics} topic(s)" + (f" x {options.partitions} partitions" if options.partitions else "")
    text = f"magnetar perf {options.verb}: {options.client} client, {topics}"
    if options.processes > 1:
        text += f", {options.processes} client processes"
    if options.verb != "consume":
        batching = (f"batching on ({options.batch_max_messages} msgs / {options.batch_max_bytes} B / "
                    f"{options.batch_delay_ms:g} ms)") if options.batching else "batching off"
        rate = f"{options.rate_per_s:g} msg/s" if options.rate_per_s else "max rate"
        text += (f", {options.num_producers} producer(s)/topic, {options.size_bytes} B, {rate}, {batching}, "
                 f"compression {options.compression}")
    if options.verb != "produce":
        text += f", {options.num_consumers} consumer(s)/topic, {options.subscription_type}, ack {options.ack_mode}"
    return text


_ROWS: tuple[tuple[str, Callable[[Interval], str]], ...] = (
    ("messages", lambda i: f"{i.messages:,}"),
    ("errors", lambda i: f"{i.errors:,}"),
    ("msg/s", lambda i: f"{i.msg_per_s:,.0f}"),
    ("MB/s", lambda i: f"{i.mb_per_s:,.2f}"),
    ("latency min ms", lambda i: f"{i.latency.min_ms:.3f}"),
    ("latency mean ms", lambda i: f"{i.latency.mean_ms:.3f}"),
    ("latency p50 ms", lambda i: f"{i.latency.p50_ms:.3f}"),
    ("latency p95 ms", lambda i: f"{i.latency.p95_ms:.3f}"),
    ("latency p99 ms", lambda i: f"{i.latency.p99_ms:.3f}"),
    ("latency p999 ms", lambda i: f"{i.latency.p999_ms:.3f}"),
    ("latency max ms", lambda i: f"{i.latency.max_ms:.3f}"),
)


def server_cpu_us_per_msg(server_cpu_s: float, interval: Interval) -> float | None:
    return round(server_cpu_s / interval.messages * 1e6, 3) if interval.messages else None


def summary_table(options: PerfOptions, elapsed_s: float, totals: Sequence[Interval],
                  server_cpu_s: float | None = None) -> str:
    """The final table: one column per flow (publish, consume), one row per figure."""
    width = 16
    lines = [describe(options), f"elapsed {elapsed_s:.2f} s", ""]
    lines.append(f"{'':<18}" + "".join(f"{t.name:>{width}}" for t in totals))
    rows = list(_ROWS)
    if server_cpu_s is not None:
        cpu = server_cpu_s
        rows.append(("server CPU µs/msg", lambda i: f"{server_cpu_us_per_msg(cpu, i) or 0:.2f}"))
    for label, cell in rows:
        lines.append(f"{label:<18}" + "".join(f"{cell(t):>{width}}" for t in totals))
    if any(t.name == "consume" for t in totals):
        lines.append("(consume latency is end to end: payload stamp, else publish time, to receive)")
    return "\n".join(lines)


def summary_json(options: PerfOptions, elapsed_s: float, totals: Sequence[Interval],
                 intervals: Sequence[Sequence[Interval]], server_cpu_s: float | None = None) -> str:
    """The machine form: options, totals per flow, the broker's CPU when measured, every per-second interval."""
    document: dict[str, object] = {
        "schema": JSON_SCHEMA_VERSION,
        "verb": options.verb,
        "client": options.client,
        "options": options.as_dict(),
        "elapsed_s": round(elapsed_s, 6),
        "totals": {t.name: t.as_dict() for t in totals},
        "intervals": [{i.name: i.as_dict() for i in tick} for tick in intervals],
    }
    if server_cpu_s is not None:
        document["server"] = {"pid": options.broker_pid, "cpu_s": round(server_cpu_s, 3),
                              "cpu_us_per_msg": {t.name: server_cpu_us_per_msg(server_cpu_s, t) for t in totals}}
    return json.dumps(document, indent=2)
