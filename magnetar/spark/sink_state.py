"""The exactly-once sink's files under ``{checkpointLocation}/magnetar-sink/{sinkId}/``: what outlives a killed
driver or executor, so that a restart can end every transaction the sink opened.

    intent-{batchId}.json      the driver's decision to commit a micro-batch: {batchId, txns, done}
    open/{most}-{least}.json   one per transaction a task opened, written before its first send:
                               {txn, deadlineMs, writer, batchId, partition, attempt}

Every file is written whole (temp file, fsync, rename, fsync of the directory): a reader sees the old version or
the new one, never a torn one. The driver creates the directories; a task only writes into ``open/``, so an
executor that cannot see the checkpoint (a path on the driver's machine only) fails with an error saying so
instead of recording where nobody looks. Knows files and JSON; nothing of Spark or the broker.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from magnetar.spark.options import OptionError

__all__ = ["INTENTS_KEPT", "OpenRecord", "SinkFiles", "SinkStateError", "TxnRef", "local_path"]

INTENTS_KEPT: Final = 20  # intents of this many recent batches stay (a replay is at most one batch back)
TxnRef = tuple[int, int, int]  # (most, least, deadline_ms)


class SinkStateError(RuntimeError):
    """A sink file is unreadable, or the checkpoint cannot be reached from here; the message says which."""


@dataclass(frozen=True, slots=True)
class OpenRecord:
    """A transaction a task opened: enough to end it, and to say whose it was."""

    txn: tuple[int, int]
    deadline_ms: int
    writer: str  # the id of the micro-batch's writer (one per batch planned); "" outside a streaming write
    batch_id: int | None
    partition: int | None
    attempt: int | None

    def to_json(self) -> dict[str, Any]:
        return {"txn": list(self.txn), "deadlineMs": self.deadline_ms, "writer": self.writer,
                "batchId": self.batch_id, "partition": self.partition, "attempt": self.attempt}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> OpenRecord:
        most, least = raw["txn"]
        return cls((int(most), int(least)), int(raw["deadlineMs"]), str(raw["writer"]), raw.get("batchId"),
                   raw.get("partition"), raw.get("attempt"))


def local_path(location: str) -> Path:
    """``checkpointLocation`` as a path of this machine (``file:`` URLs and plain paths; no remote stores)."""
    if location.startswith("file:"):
        location = location[len("file:"):]
        while location.startswith("//"):
            location = location[1:]
    elif "://" in location:
        raise OptionError(f"the exactly-once sink keeps its intents under checkpointLocation, which must be a "
                          f"local or mounted path here, got {location!r}")
    return Path(location)


def _write_whole(directory: Path, name: str, body: bytes) -> None:
    final = directory / name
    temp = directory / f"{name}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, body)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, final)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class SinkFiles:
    """One sink's intents and open-transaction records."""

    def __init__(self, checkpoint_location: str, sink_id: str) -> None:
        self.location = checkpoint_location
        self.root = local_path(checkpoint_location) / "magnetar-sink" / sink_id
        self.open_dir = self.root / "open"

    def prepare(self) -> None:
        """Driver side, before any task: create the directories tasks write into."""
        self.open_dir.mkdir(parents=True, exist_ok=True)

    # ---- intents ----------------------------------------------------------------------------------------

    def _intent(self, batch_id: int) -> Path:
        return self.root / f"intent-{batch_id}.json"

    def load_intent(self, batch_id: int) -> tuple[list[TxnRef], bool] | None:
        """The recorded txns of ``batch_id`` and whether they were all committed, or None."""
        try:
            raw = json.loads(self._intent(batch_id).read_text())
        except FileNotFoundError:
            return None
        if raw.get("batchId") != batch_id:
            raise SinkStateError(f"intent file {self._intent(batch_id)} names batch {raw.get('batchId')}")
        return [(int(a), int(b), int(c)) for a, b, c in raw["txns"]], bool(raw["done"])

    def save_intent(self, batch_id: int, txns: list[TxnRef], *, done: bool) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"batchId": batch_id, "txns": [list(t) for t in txns], "done": done}).encode()
        _write_whole(self.root, self._intent(batch_id).name, body)

    def _intent_ids(self) -> list[int]:
        stems = (p.stem.removeprefix("intent-") for p in self.root.glob("intent-*.json"))
        return sorted(int(s) for s in stems if s.isdigit())

    def prune_intents(self, batch_id: int) -> None:
        for kept in self._intent_ids():
            if kept <= batch_id - INTENTS_KEPT:
                self._intent(kept).unlink(missing_ok=True)

    def named(self) -> set[tuple[int, int]]:
        """Every txn a kept intent names (done or not): the sink commits these and never aborts them."""
        out: set[tuple[int, int]] = set()
        for batch_id in self._intent_ids():
            loaded = self.load_intent(batch_id)
            if loaded is not None:
                out.update((most, least) for most, least, _ in loaded[0])
        return out

    # ---- open-transaction records -----------------------------------------------------------------------

    def record_open(self, record: OpenRecord) -> None:
        """Task side, before the first send: fails if the driver's directory is not visible from here."""
        if not self.open_dir.is_dir():
            raise SinkStateError(
                f"the exactly-once sink records its transactions under checkpointLocation {self.location!r}, and "
                f"{self.open_dir} does not exist on {socket.gethostname()}: on a cluster, checkpointLocation must be "
                f"a path every worker mounts (the driver created it on its machine)")
        _write_whole(self.open_dir, f"{record.txn[0]}-{record.txn[1]}.json", json.dumps(record.to_json()).encode())

    def open_records(self) -> list[OpenRecord]:
        if not self.open_dir.is_dir():
            return []
        out = []
        for path in sorted(self.open_dir.glob("*.json")):
            try:
                out.append(OpenRecord.from_json(json.loads(path.read_text())))
            except FileNotFoundError:
                continue  # forgotten meanwhile
            except (ValueError, KeyError, TypeError) as exc:
                raise SinkStateError(f"open-transaction record {path} is unreadable: {exc}") from exc
        return out

    def forget(self, txn: tuple[int, int]) -> None:
        """The txn has ended (committed or aborted): its record goes."""
        (self.open_dir / f"{txn[0]}-{txn[1]}.json").unlink(missing_ok=True)

    def clear_temp(self) -> None:
        """Temp files of writers killed mid-write (their txn had no send yet: it holds nothing)."""
        for directory in (self.root, self.open_dir):
            for path in directory.glob("*.tmp"):
                path.unlink(missing_ok=True)
