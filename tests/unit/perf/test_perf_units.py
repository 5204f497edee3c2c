"""``magnetar perf`` pure pieces: the histogram, pacing, payload stamps, option parsing, output shapes."""

from __future__ import annotations

import argparse
import json

import pytest

from magnetar.perf import OptionsError, PerfOptions, add_perf_parser, options_from
from magnetar.perf._flows import share
from magnetar.perf._histogram import BUCKET_COUNT, EXACT_BELOW_US, VALUE_MAX_US, Histogram, bucket_of, bucket_value_us
from magnetar.perf._pacing import STAMP_BYTES, Pacer, filler, latency_us, stamp_of, stamped
from magnetar.perf._recorder import Recorder
from magnetar.perf._report import progress_line, summary_json, summary_table


def parse(*argv: str) -> PerfOptions:
    parser = argparse.ArgumentParser()
    add_perf_parser(parser.add_subparsers(dest="verb"))
    return options_from(parser.parse_args(["perf", *argv]))


# ---- histogram ------------------------------------------------------------------------------------------


def test_small_values_are_exact() -> None:
    hist = Histogram()
    for value in range(1, 101):
        hist.record(value)
    assert hist.percentile_us(0.5) == 50
    assert hist.percentile_us(0.99) == 99
    assert hist.percentile_us(1.0) == 100
    assert (hist.min_us, hist.max_us, hist.count) == (1, 100, 100)


def test_large_values_are_within_two_percent() -> None:
    for value in (128, 1_000, 12_345, 987_654, 60_000_000):
        hist = Histogram()
        hist.record(value)
        hist.record(value * 2)
        assert abs(hist.percentile_us(0.5) - value) <= value / 64


def test_buckets_are_bounded_and_monotonic() -> None:
    assert bucket_of(-5) == 0
    assert bucket_of(VALUE_MAX_US * 10) == bucket_of(VALUE_MAX_US) < BUCKET_COUNT
    indices = [bucket_of(v) for v in range(0, 100_000, 7)]
    assert indices == sorted(indices)
    for index in (0, EXACT_BELOW_US - 1, EXACT_BELOW_US, bucket_of(VALUE_MAX_US) - 1):
        assert bucket_of(int(bucket_value_us(index))) == index


def test_merge_adds_counts_and_extremes() -> None:
    a, b = Histogram(), Histogram()
    a.record(10)
    b.record(5_000)
    b.record(20)
    a.merge(b)
    assert (a.count, a.min_us, a.max_us, a.sum_us) == (3, 10, 5_000, 5_030)
    assert a.percentile_us(0.5) == 20


def test_empty_histogram_summary_is_zero() -> None:
    summary = Histogram().summary()
    assert summary.count == 0 and summary.p99_ms == 0.0
    with pytest.raises(ValueError):
        Histogram().percentile_us(1.5)


def test_summary_is_in_milliseconds() -> None:
    hist = Histogram()
    for _ in range(1000):
        hist.record(2_000)
    summary = hist.summary()
    assert summary.p50_ms == pytest.approx(2.0, rel=0.02)
    assert summary.max_ms == 2.0 and summary.mean_ms == 2.0


# ---- recorder, pacing, stamps ----------------------------------------------------------------------------


def test_recorder_ticks_intervals_into_totals() -> None:
    recorder = Recorder("publish")
    recorder.record(100, 1_000)
    recorder.record_many(9, 900, [3_000])
    recorder.error(2)
    assert recorder.seen == 10
    first = recorder.tick(2.0)
    assert (first.messages, first.bytes, first.errors, first.latency.count) == (10, 1_000, 2, 2)
    assert first.msg_per_s == 5.0 and first.mb_per_s == pytest.approx(0.0005)
    assert recorder.tick(1.0).messages == 0
    total = recorder.overall(3.0)
    assert (total.messages, total.errors, total.latency.count) == (10, 2, 2)


def test_pacer_spaces_sends_to_the_rate() -> None:
    pacer = Pacer(100.0, start_s=10.0)
    assert pacer.wait_s(10.0) == 0.0  # message 0 is due at once
    assert pacer.wait_s(10.0) == pytest.approx(0.01)  # message 1 is due 10 ms later
    assert pacer.wait_s(10.5) == 0.0  # behind schedule: no wait
    assert Pacer(0.0, start_s=0.0).wait_s(0.0) == 0.0  # rate 0: as fast as possible


def test_stamps_round_trip_and_fall_back_to_publish_time() -> None:
    body = filler(64)
    assert len(body) == 64 and len(filler(3)) == 3
    payload = stamped(body, now_ns=5_000_000_000)
    assert len(payload) == 64 and stamp_of(payload) == 5_000_000_000
    assert latency_us(payload, 0, now_ns=5_002_000_000) == 2_000
    assert stamp_of(body) is None
    assert latency_us(body, publish_time_ms=5_000, now_ns=5_003_000_000) == 3_000
    assert stamped(b"tiny") == b"tiny" and STAMP_BYTES == 12


def test_share_cuts_counts_exactly() -> None:
    assert [share(10, 3, i) for i in range(3)] == [4, 3, 3]
    assert share(0, 3, 1) == 0


# ---- options -------------------------------------------------------------------------------------------


def test_produce_flags_like_pulsar_perf() -> None:
    options = parse("produce", "my-topic", "-r", "500", "-s", "256", "-m", "1000", "-t", "3", "-n", "2",
                    "--no-batching", "-z", "lz4", "--client", "magnetar", "--json", "--sample-every", "10")
    assert options.verb == "produce" and options.client == "magnetar"
    assert (options.rate_per_s, options.size_bytes, options.messages) == (500.0, 256, 1000)
    assert (options.num_topics, options.num_producers, options.batching) == (3, 2, False)
    assert options.compression == "lz4" and options.json and options.sample_every == 10
    assert options.topic_names() == ["my-topic-0", "my-topic-1", "my-topic-2"]


def test_defaults_are_official_client_batched_max_rate() -> None:
    options = parse("produce", "--test-duration", "5")
    assert options.client == "official" and options.batching and options.rate_per_s == 0
    assert options.topic_names() == ["persistent://public/default/perf"]
    assert options.progress and not options.json


def test_consume_and_e2e_flags() -> None:
    consume = parse("consume", "t", "-m", "10", "--subscription-type", "shared", "--initial-position", "earliest",
                    "-c", "4", "-q", "5000")
    assert (consume.verb, consume.subscription_type, consume.num_consumers) == ("consume", "shared", 4)
    assert consume.initial_position == "earliest" and consume.receiver_queue_size == 5000
    e2e = parse("e2e", "t", "-r", "1000", "--test-duration", "2", "--ack-mode", "cumulative")
    assert e2e.verb == "e2e" and e2e.rate_per_s == 1000 and e2e.ack_mode == "cumulative"


@pytest.mark.parametrize("argv", [
    ("produce", "-m", "10", "-u", "ftp://nope"),
    ("produce", "-m", "10", "--sample-every", "0"),
    ("consume", "-m", "10", "--subscription-type", "shared", "--ack-mode", "cumulative"),
])
def test_bad_combinations_are_refused(argv: tuple[str, ...]) -> None:
    with pytest.raises(OptionsError):
        parse(*argv)


def test_unknown_choices_exit_like_argparse() -> None:
    with pytest.raises(SystemExit):
        parse("produce", "-m", "1", "--compression", "brotli")
    with pytest.raises(SystemExit):
        parse("produce", "-m", "1", "--client", "java")


def test_cli_dispatches_perf_and_reports_bad_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from magnetar.cli import main

    assert main(["perf", "produce", "-u", "ftp://nope"]) == 2
    assert "--service-url must be pulsar://" in capsys.readouterr().err


def test_http_service_url_with_the_official_client() -> None:
    assert parse("produce", "-m", "1", "-u", "http://localhost:8080").service_url == "http://localhost:8080"
    with pytest.raises(OptionsError, match="official client"):
        parse("produce", "-m", "1", "-u", "http://localhost:8080", "--client", "magnetar")


def test_zero_messages_and_no_duration_means_no_limit() -> None:
    options = parse("produce", "-m", "0")
    assert options.messages == 0 and options.duration_s == 0


def test_pulsar_perf_flag_spellings() -> None:
    produce = parse("produce", "t", "-time", "7", "-db", "-b", "5", "-bm", "50", "-bb", "4096")
    assert produce.duration_s == 7 and not produce.batching
    assert (produce.batch_delay_ms, produce.batch_max_messages, produce.batch_max_bytes) == (5, 50, 4096)
    consume = parse("consume", "t", "-st", "Key_Shared", "-ss", "sub1,sub2", "-sp", "Earliest")
    assert (consume.subscription_type, consume.subscription, consume.initial_position) == (
        "key_shared", "sub1", "earliest")


def test_help_prints_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from magnetar.cli import main

    with pytest.raises(SystemExit):
        main(["perf", "consume", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: perf-sub)" in text and "(default: exclusive)" in text and "(default: 1000)" in text


# ---- output ---------------------------------------------------------------------------------------------


def _intervals() -> list[Recorder]:
    publish, consume = Recorder("publish"), Recorder("consume")
    for latency in (500, 1_000, 2_000):
        publish.record(1024, latency)
        consume.record(1024, latency * 2)
    return [publish, consume]


def test_progress_line_shows_rate_bandwidth_and_percentiles() -> None:
    ticks = [r.tick(1.0) for r in _intervals()]
    line = progress_line(3.0, ticks)
    assert line.startswith("[   3.0s] publish 3 msg/s 0.0 MB/s p50 1.00 p99 2.00 p999 2.00 ms")
    assert "| consume 3 msg/s" in line


def test_summary_table_has_a_column_per_flow() -> None:
    recorders = _intervals()
    for r in recorders:
        r.tick(1.0)
    options = parse("e2e", "t", "-m", "3")
    text = summary_table(options, 1.0, [r.overall(1.0) for r in recorders])
    lines = text.splitlines()
    assert lines[0].startswith("magnetar perf e2e: official client, 1 topic(s)")
    header = next(line for line in lines if "publish" in line and "consume" in line and "latency" not in line)
    assert header.split() == ["publish", "consume"]
    rows = {line[:18].strip(): line[18:].split() for line in lines if line[:18].strip()}
    assert rows["messages"] == ["3", "3"]
    assert rows["latency p99 ms"] == ["2.000", "4.000"]
    assert rows["latency max ms"] == ["2.000", "4.000"]


def test_json_summary_fields() -> None:
    recorders = _intervals()
    ticks = [[r.tick(1.0) for r in recorders]]
    options = parse("e2e", "t", "-m", "3", "--json")
    document = json.loads(summary_json(options, 1.5, [r.overall(1.5) for r in recorders], ticks))
    assert document["schema"] == 1 and document["verb"] == "e2e" and document["client"] == "official"
    assert document["options"]["messages"] == 3 and document["elapsed_s"] == 1.5
    publish = document["totals"]["publish"]
    assert set(publish) == {"messages", "bytes", "errors", "elapsed_s", "msg_per_s", "mb_per_s", "latency_ms"}
    assert publish["messages"] == 3 and publish["bytes"] == 3072 and publish["msg_per_s"] == 2.0
    assert set(publish["latency_ms"]) == {"count", "min", "mean", "p50", "p95", "p99", "p999", "max"}
    assert document["intervals"][0]["consume"]["messages"] == 3


# ---- several client processes -----------------------------------------------------------------------------


def test_processes_split_topics_count_and_rate() -> None:
    from magnetar.perf._processes import child_options

    options = parse("e2e", "t", "-t", "5", "--processes", "2", "-m", "101", "-r", "1000")
    first, second = child_options(options, 0), child_options(options, 1)
    assert first.topic_names() == ["t-0", "t-2", "t-4"] and second.topic_names() == ["t-1", "t-3"]
    assert first.all_topic_names() == [f"t-{i}" for i in range(5)]
    assert (first.messages, second.messages) == (51, 50)
    assert first.rate_per_s == second.rate_per_s == 500
    assert not first.json and not first.progress and first.duration_s == 0  # the parent owns clock and output


def test_processes_share_one_topic_only_for_producers_or_shared_subscriptions() -> None:
    assert parse("produce", "t", "--processes", "3").topic_names() == ["t"]
    assert parse("consume", "t", "--processes", "3", "-st", "Shared").processes == 3
    with pytest.raises(OptionsError, match="--processes"):
        parse("consume", "t", "--processes", "3")
    with pytest.raises(OptionsError, match="--processes"):
        parse("produce", "t", "--processes", "0")


def test_recorder_adds_what_another_took() -> None:
    child, parent = Recorder("publish"), Recorder("publish")
    child.record(100, 50)
    child.record(100, 5_000)
    child.error()
    parent.record(100, 7)
    parent.add(*child.take())
    assert child.take()[1:] == (0, 0, 0)  # taking empties the child's interval
    interval = parent.tick(1.0)
    assert (interval.messages, interval.bytes, interval.errors) == (3, 300, 1)
    assert interval.latency.count == 3 and interval.latency.max_ms == 5.0


def test_broker_cpu_per_message_in_both_summaries() -> None:
    import os

    from magnetar.perf._run import process_cpu_s

    own = process_cpu_s(os.getpid())
    assert own is not None and own > 0 and process_cpu_s(2**22 + 1) is None  # past pid_max: unreadable
    recorders = _intervals()
    ticks = [[r.tick(1.0) for r in recorders]]
    options = parse("e2e", "t", "-m", "3", "--json", "--broker-pid", "42")
    document = json.loads(summary_json(options, 1.5, [r.overall(1.5) for r in recorders], ticks, 0.000006))
    assert document["server"] == {"pid": 42, "cpu_s": 0.0, "cpu_us_per_msg": {"publish": 2.0, "consume": 2.0}}
    assert "server" not in json.loads(summary_json(options, 1.5, [r.overall(1.5) for r in recorders], ticks))
    text = summary_table(options, 1.5, [r.overall(1.5) for r in recorders], 0.000006)
    assert [line.split()[-2:] for line in text.splitlines() if line.startswith("server CPU")] == [["2.00", "2.00"]]
