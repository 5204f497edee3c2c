"""Run the simulator from the command line: a long soak over many seeds, or the replay of one seed.

    .venv/bin/python -m tests.sim.run --seeds 10000 --ops 1000          # soak: seeds 0..9999
    .venv/bin/python -m tests.sim.run --start 5000 --seeds 100          # another range
    .venv/bin/python -m tests.sim.run --seed 1234 --ops 1000 --trace    # replay one seed, print its steps

Stops at the first failing seed and prints the command that replays it. Exit status 1 on a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time

from tests.sim.world import InvariantViolation, Simulation, Stats, run_seed

DEFAULT_OPS = 400


def _replay(seed: int, ops: int, trace: bool) -> int:
    import asyncio

    sim = Simulation(seed, ops)
    try:
        stats = asyncio.run(sim.run())
    except InvariantViolation as exc:
        print(exc)
        return 1
    finally:
        if trace:
            print("\n".join(sim.trace))
    print(f"seed {seed}: ok, digest {sim.digest()}, {stats}")
    return 0


def _soak(start: int, seeds: int, ops: int) -> int:
    total = Stats()
    began = time.monotonic()
    for seed in range(start, start + seeds):  # bounded by --seeds
        try:
            stats, _ = run_seed(seed, ops)
        except InvariantViolation as exc:
            print(exc)
            print(f"replay: .venv/bin/python -m tests.sim.run --seed {seed} --ops {ops} --trace")
            return 1
        for f in dataclasses.fields(Stats):
            setattr(total, f.name, getattr(total, f.name) + getattr(stats, f.name))
        done = seed - start + 1
        if done % 100 == 0 or done == seeds:
            print(f"{done}/{seeds} seeds ok in {time.monotonic() - began:.0f} s: {total}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("--start", type=int, default=0, help="first seed of a soak")
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds a soak runs")
    parser.add_argument("--ops", type=int, default=DEFAULT_OPS, help="operations per seed")
    parser.add_argument("--trace", action="store_true", help="print every step of a replay")
    parser.add_argument("--log", default="CRITICAL", help="log level of magnetar's own logs (e.g. WARNING)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log.upper(), format="%(levelname)s %(name)s: %(message)s")
    if args.seed is not None:
        return _replay(args.seed, args.ops, args.trace)
    return _soak(args.start, args.seeds, args.ops)


if __name__ == "__main__":
    sys.exit(main())
