"""The bench suite's pure parts: the peer harness's summaries into per-message figures, the issue-figures table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.peers import PeerResults, _add_phys, _add_summary
from bench.report import markdown
from bench.suite import Target, Workload, run_publish, workloads


def args(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {"repeats": 2, "quick": True, "only": None, "peers": None, "profile": False,
                                 "backlog_gb": None}
    values.update(overrides)
    return argparse.Namespace(**values)


def test_peer_summaries_become_cpu_per_message_and_latency() -> None:
    results = PeerResults(note="")
    summary = {"kind": "summary", "system": "rabbitmq-stream", "n": 200_000,
               "median": {"publish_server_cpu_s": 0.78, "consume_server_cpu_s": 0.05, "latency_p99_ms": 1.5,
                          "publish_msgs_per_s": 90_000.0}}
    _add_summary(results, json.dumps(summary))
    _add_summary(results, "rabbitmq-stream  1/1  94,251")  # the harness's text table is ignored
    _add_summary(results, json.dumps({"kind": "trial", "system": "redis"}))
    phys = {"kind": "phys", "disk": {"4KiB_append+fsync": {"sync_p50_ms": 0.31, "sync_p99_ms": 0.9}}}
    _add_phys(results, json.dumps(phys))
    rabbit = results.figures["RabbitMQ stream"]
    assert round(rabbit["publish CPU µs/msg"], 6) == 3.9 and round(rabbit["consume CPU µs/msg"], 6) == 0.25
    assert rabbit["e2e p99 ms"] == 1.5 and rabbit["publish msg/s"] == 90_000.0
    assert results.value("one 4 KiB append + fsync", "sync p50 ms") == 0.31
    assert results.value("Redis", "publish CPU µs/msg") is None and len(results.raw) == 2


def test_every_issue_row_is_a_target_of_some_workload() -> None:
    rows = [t.row for w in workloads(quick=False, backlog_gb=10) for t in w.targets]
    assert len(rows) == len(set(rows)) == 10
    for words in ("unbatched 1 KiB publish", "unbatched publish, official client", "p99 at 1,000 msg/s",
                  "per batched 1 KiB publish", "cumulative acks", "individual acks", "created per second",
                  "RSS for 10,000 idle topics", "idle with 10,000 topics", "restart to serving with 10,000 topics"):
        assert sum(words in row for row in rows) == 1, words


def test_table_shows_best_spread_met_and_peer_ratio() -> None:
    target = Target("broker CPU per batched 1 KiB publish (µs)", "server CPU µs/msg", 1.0, False,
                    (("RabbitMQ stream", "publish CPU µs/msg"), ("Redis", "publish CPU µs/msg")))
    measured = Workload("publish-batched", "publish batched", run_publish, targets=(target,),
                        runs=[{"server CPU µs/msg": 2.5}, {"server CPU µs/msg": 2.0}])
    missing = Workload("restart", "restart", run_publish, targets=(
        Target("restart to serving (s)", "restart to serving s", 5.0, False),))
    peers = PeerResults(figures={"RabbitMQ stream": {"publish CPU µs/msg": 4.0}}, note="", commands=["run x"])
    text = markdown([measured, missing], {"cpu": "test"}, args(peers=""), peers, 60.0)
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    row = rows["| broker CPU per batched 1 KiB publish (µs) (`publish-batched`)"]
    assert "| ≤ 1 | 2 | 2 - 2.5 | no | RabbitMQ stream 4 | 0.5x |" in row  # Redis absent: not shown
    assert "not measured" in rows["| restart to serving (s)"]
    assert "--peers" in text and "`run x`" in text


def test_peers_not_run_say_so() -> None:
    target = Target("e2e p99 (ms)", "e2e p99 ms", 0.7, False, (("Redis appendfsync always", "e2e p99 ms"),))
    w = Workload("e2e-1000", "e2e", run_publish, targets=(target,), runs=[{"e2e p99 ms": 1.4}])
    text = markdown([w], {}, args(), PeerResults(note="not run (no --peers)"), 1.0)
    assert "| ≤ 0.7 | 1.4 | 1.4 | no | not run (no --peers) | - |" in text


def test_profiles_section_lists_files_and_hot_spots(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "publish.top.txt").write_text(
        "10 samples at 250 Hz (busy samples only)\n\nself time:\n  60.0%  fsync (storage.py:1)\n"
        "  40.0%  send (x.py:2)\n\ninclusive time:\n 100.0%  main (cli.py:1)\n")
    w = Workload("publish-batched", "publish batched", run_publish, runs=[{"server CPU µs/msg": 2.0}])
    text = markdown([w], {}, args(profile=True, out=tmp_path), PeerResults(), 1.0)
    section = text[text.index("## Profiles"):]
    assert "`profiles/publish.svg`, `profiles/publish.top.txt`: publish, batched (`publish-batched`)" in section
    assert "  - 60.0%  fsync (storage.py:1)\n  - 40.0%  send (x.py:2)\n" in section
    assert "main (cli.py:1)" not in section and "dispatch" not in section  # inclusive lines; absent workloads
    assert "Not recorded" in markdown([w], {}, args(), PeerResults(), 1.0)
