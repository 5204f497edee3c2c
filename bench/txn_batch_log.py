"""PIP-160's benchmark: transactions per second (open → produce 1 → consume+ack 1 → commit) at 1, 16 and 128
transactions in flight, with the coordinator log and the pending-ack logs written one record per entry and
batched, side by side in one run, plus the storage entries each transaction cost in those logs.

    .venv/bin/python bench/txn_batch_log.py [--transactions 2000] [--concurrency 1,16,128] [--repeats 1]

Two ``magnetar standalone`` processes (batching off / on), fsync on, alternating per workload. Entries per
transaction come from the writers' own counts (``GET /admin/v3/transactions/batchedLog``: entries and
records written by each log family), read before and after each run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.txn_perf import CONFIGS, perf_txn  # noqa: E402
from tests.integration.admin.http import call  # noqa: E402
from tests.integration.broker_process import BrokerProcess  # noqa: E402

FAMILIES = ("transactionLog", "pendingAckLog")


def written(broker: BrokerProcess) -> dict[str, tuple[int, int]]:
    status, body = call(broker.web_url, "GET", "/admin/v3/transactions/batchedLog")
    assert status == 200, body
    return {f: (body[f]["entriesWritten"], body[f]["recordsWritten"]) for f in FAMILIES}


def run_one(broker: BrokerProcess, level: int, transactions: int) -> dict[str, Any]:
    before = written(broker)
    result = perf_txn(broker, level, transactions)
    after = written(broker)
    for family in FAMILIES:
        entries = after[family][0] - before[family][0]
        records = after[family][1] - before[family][1]
        result[f"{family}_entries_per_txn"] = entries / max(1, result["transactions"])
        result[f"{family}_records_per_entry"] = records / max(1, entries)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--concurrency", default="1,16,128")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    results: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp:
        brokers = {name: BrokerProcess(Path(tmp) / name.replace(" ", "-"),
                                       extra_args=tuple(a for k in keys for a in ("--set", k))).start()
                   for name, keys in CONFIGS.items()}
        try:
            for _ in range(args.repeats):
                for level in levels:
                    for name, broker in brokers.items():
                        run = run_one(broker, level, args.transactions)
                        best = results[name].get(level)
                        if best is None or run["txn_per_s"] > best["txn_per_s"]:
                            results[name][level] = run
        finally:
            for broker in brokers.values():
                broker.kill()
    print(f"{'in flight':>9} | {'log':>11} | {'txn/s':>8} | {'p50 ms':>7} | {'TC entries/txn':>14} | "
          f"{'ack entries/txn':>15}")
    for level in levels:
        for name in CONFIGS:
            r = results[name][level]
            print(f"{level:>9} | {name:>11} | {r['txn_per_s']:8.1f} | {r['p50_ms']:7.1f} | "
                  f"{r['transactionLog_entries_per_txn']:14.3f} | {r['pendingAckLog_entries_per_txn']:15.3f}")
        off, on = results["plain log"][level], results["batched log"][level]
        print(f"{level:>9} | {'on / off':>11} | {on['txn_per_s'] / off['txn_per_s']:7.2f}x |         | "
              f"{on['transactionLog_entries_per_txn'] / max(1e-9, off['transactionLog_entries_per_txn']):13.3f}x |"
              f" {on['pendingAckLog_entries_per_txn'] / max(1e-9, off['pendingAckLog_entries_per_txn']):14.3f}x")
    print(json.dumps({name: {str(k): v for k, v in by.items()} for name, by in results.items()}, indent=2))


if __name__ == "__main__":
    main()
