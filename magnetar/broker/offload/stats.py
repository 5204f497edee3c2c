"""What topic stats show of tiered storage: the offloaded ledgers, and reads that failed in the offload store."""

from __future__ import annotations

from typing import Any

from magnetar.ledger.api import ManagedLedger, OffloadReadHealth


def offload_stats(ledger: ManagedLedger | None) -> dict[str, Any]:
    """TopicStats' offload fields from the ledger list (offload failures show in the offload status), and
    magnetar's: reads that failed in the offload store, and the last one's reason while they fail."""
    done = [x for x in (ledger.ledgers() if ledger is not None else []) if x.offload is not None and x.offload.complete]
    reads = ledger.offload_reads if ledger is not None else OffloadReadHealth()
    return {
        "offloadedStorageSize": sum(x.size_bytes for x in done),
        "lastOffloadLedgerId": max((x.ledger_id for x in done), default=0),
        "lastOffloadSuccessTimeStamp": max((x.offload.timestamp_ms for x in done if x.offload), default=0),
        "lastOffloadFailureTimeStamp": 0,
        **offload_read_json(reads),
    }


def offload_read_json(reads: OffloadReadHealth) -> dict[str, Any]:
    return {"offloadReadErrors": reads.errors, "offloadReadError": reads.last_error if reads.failing else "",
            "lastOffloadReadErrorTimeStamp": reads.last_error_ms}
