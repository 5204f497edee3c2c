"""Write the suite's result table (Markdown for people, JSON for machines) with the machine description.

Per figure the best run is shown (highest for rates, lowest for latency, CPU and memory) with the spread over
all runs, because other jobs share the machine and a slow run says more about them than about magnetar. The
first table has one row per figure of issue #23: its aim, the measured value, the peers' figures from the same
run and the ratio magnetar / peer.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.peers import PeerResults
    from bench.suite import Target, Workload

_HIGHER_IS_BETTER = ("msg/s", "MB/s", "created /s")
_SHOWN = ("publish msg/s", "publish MB/s", "publish p50 ms", "publish p99 ms", "publish p999 ms", "consume msg/s",
          "consume MB/s", "consume p99 ms", "e2e msg/s", "e2e p50 ms", "e2e p99 ms", "e2e p999 ms",
          "server CPU µs/msg", "server CPU %", "broker RSS MiB", "KiB per topic", "topics", "topics+subs created /s",
          "idle CPU % of a core", "backlog GB", "data dir build s", "ready line s", "restart to serving s")
PROFILES = (("publish-unbatched", "publish, unbatched", "publish-unbatched"),
            ("publish", "publish, batched", "publish-batched"),
            ("dispatch", "dispatch, cumulative acks", "consume-backlog"),
            ("dispatch-individual", "dispatch, individual acks", "consume-backlog-individual"),
            ("topic-create", "topic + subscription creation", "topics"), ("idle", "idle with many topics", "topics"))


def best(figure: str, values: list[float]) -> float:
    return max(values) if figure.endswith(_HIGHER_IS_BETTER) else min(values)


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value >= 1 else f"{value:.3f}"


def spread(values: list[float]) -> str:
    return fmt(values[0]) if len(values) == 1 else f"{fmt(min(values))} - {fmt(max(values))}"


def write_results(out: Path, workloads: list[Workload], about: dict[str, str], args: argparse.Namespace,
                  peers: PeerResults, elapsed_s: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.md").write_text(markdown(workloads, about, args, peers, elapsed_s))
    document: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": about, "repeats": args.repeats,
        "quick": args.quick, "elapsed_s": round(elapsed_s, 1),
        "workloads": [{"name": w.name, "title": w.title, "command": w.command, "fsync": w.fsync, "runs": w.runs}
                      for w in workloads],
        "peers": {"note": peers.note, "commands": peers.commands, "figures": peers.figures, "raw": peers.raw},
    }
    (out / "latest.json").write_text(json.dumps(document, indent=2) + "\n")


def invocation(args: argparse.Namespace) -> str:
    parts = [".venv/bin/python bench/suite.py", f"--repeats {args.repeats}"]
    parts += ["--quick"] if args.quick else []
    parts += [f"--only {' '.join(args.only)}"] if args.only else []
    parts += ["--peers"] if args.peers is not None else []
    parts += ["--profile"] if args.profile else []
    parts += [f"--backlog-gb {args.backlog_gb:g}"] if args.backlog_gb is not None else []
    return " ".join(parts)


def markdown(workloads: list[Workload], about: dict[str, str], args: argparse.Namespace, peers: PeerResults,
             elapsed_s: float, when: str = "") -> str:
    lines = [
        "# magnetar benchmark results", "",
        "The whole suite with peers and profiles (~20 min on the 2-core machine; `--quick`: ~5 min):", "",
        "```sh",
        "MAGNETAR_PEERBENCH=/path/to/peerbench .venv/bin/python bench/suite.py --peers --profile",
        ".venv/bin/python bench/suite.py --quick --peers DIR --profile   # smaller counts",
        ".venv/bin/python bench/suite.py --only publish-unbatched consume-backlog   # some workloads",
        "```", "",
        f"This run: `{invocation(args)}` at {when or time.strftime('%Y-%m-%d %H:%M %Z')}, {elapsed_s / 60:.1f} min."
        " Each"
        f" workload ran {args.repeats} time(s) on a fresh broker; shown: the best run and the spread (min - max)."
        " The client and the broker share the machine's cores, and other jobs may have run beside them: compare"
        " server CPU per message (broker CPU seconds from /proc over the measured run / messages), which the load"
        " of others moves least.", "",
        "## Issue #23 figures", "",
        "| figure | aim | measured (best) | spread | met | peers (same run) | ratio magnetar / peer |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in workloads:
        lines += [_row(w, t, peers) for t in w.targets]
    lines += ["", f"Peers: {_peer_note(peers)}", ""]
    lines += ["## Machine", ""] + [f"- {k}: {v}" for k, v in about.items()]
    lines += ["", "## All workloads", ""]
    for w in workloads:
        lines += [f"### {w.name}: {w.title}", "", f"`{w.command}`", "", "| figure | best | spread |", "|---|---|---|"]
        keys = [k for k in _SHOWN if any(k in r for r in w.runs)]
        for key in keys:
            values = [r[key] for r in w.runs if key in r]
            lines.append(f"| {key} | {fmt(best(key, values))} | {spread(values)} |")
        lines.append("" if w.runs else "(no successful run)\n")
    lines += _profiles(workloads, args)
    return "\n".join(lines)


PROFILE_TOP_LINES = 6


def _hot_spots(out: Path, name: str) -> list[str]:
    """The first self-time lines of a profile's top-functions text, indented under its bullet."""
    path = out / "profiles" / f"{name}.top.txt"
    if not path.exists():
        return []
    text = path.read_text().splitlines()
    own = text[text.index("self time:") + 1:] if "self time:" in text else []
    own = own[:own.index("")] if "" in own else own  # the self-time block ends at the blank line
    return [f"  - {line.strip()}" for line in own[:PROFILE_TOP_LINES]]


def _row(w: Workload, t: Target, peers: PeerResults) -> str:
    values = [r[t.figure] for r in w.runs if t.figure in r]
    if not values:
        return f"| {t.row} | {t.text()} | not measured | - | - | {_peer_cells(t, peers, None)} |"
    b = best(t.figure, values)
    return (f"| {t.row} (`{w.name}`) | {t.text()} | {fmt(b)} | {spread(values)} | {'yes' if t.met(b) else 'no'} |"
            f" {_peer_cells(t, peers, b)} |")


def _peer_cells(t: Target, peers: PeerResults, measured: float | None) -> str:
    if not t.peers:
        return "— | —"
    shown, ratios = [], []
    for peer, figure in t.peers:
        value = peers.value(peer, figure)
        if value is None:
            continue
        shown.append(f"{peer}{' (p50)' if 'p50' in figure else ''} {fmt(value)}")
        ratios.append(_ratio(measured / value) if measured is not None and value else "-")
    if not shown:
        return f"{peers.note or 'not run'} | -"
    return f"{'; '.join(shown)} | {'; '.join(ratios)}"


def _ratio(value: float) -> str:
    return f"{value:.2g}x" if value < 10 else f"{value:,.0f}x"


def _peer_note(peers: PeerResults) -> str:
    if not peers.figures:
        return peers.note or "not run"
    text = "the shared peer harness (peerbench) in the same run, each peer's median: " + "; ".join(
        f"`{c}`" for c in peers.commands)
    text += ". CPU per message is the peer server's CPU over the phase / messages; an ack means what each peer's"
    text += " durability row in the harness's README says (magnetar: fsync before the receipt)."
    return text + (f" {peers.note}" if peers.note else "")


def _profiles(workloads: list[Workload], args: argparse.Namespace) -> list[str]:
    names = {w.name for w in workloads}
    chosen = [(p, what, w) for p, what, w in PROFILES if w in names]
    if not args.profile or not chosen:
        return ["## Profiles", "", "Not recorded in this run (`--profile`).", ""]
    lines = ["## Profiles", "", "py-spy flame graphs of the broker and top functions (self and inclusive share of"
             " busy samples) during the measured part of the last run of each workload, with the top self-time"
             " lines. py-spy sees Python frames only: time in uvloop's C loop (socket reads and writes, polling)"
             " shows as `Runner.run` self time.", ""]
    for p, what, w in chosen:
        lines.append(f"- `profiles/{p}.svg`, `profiles/{p}.top.txt`: {what} (`{w}`)")
        lines += _hot_spots(args.out, p)
    return [*lines, ""]
