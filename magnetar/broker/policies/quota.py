"""Backlog quotas (``destination_storage``): how big the slowest durable subscription's backlog may grow,
and what a producer meets beyond it: ``producer_request_hold`` (refused with a retriable error, so the
client keeps its sends until the backlog shrinks) or ``producer_exception`` (refused for good)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from magnetar.broker.errors import BrokerError, InvalidRequest
from magnetar.protocol.server_errors import ServerErrorCode


class QuotaPolicy(enum.Enum):
    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"


class ProducerBlockedQuotaExceededError(BrokerError):
    server_error = ServerErrorCode.ProducerBlockedQuotaExceededError  # retriable: the client keeps trying


class ProducerBlockedQuotaExceededException(BrokerError):
    server_error = ServerErrorCode.ProducerBlockedQuotaExceededException


@dataclass(frozen=True, slots=True)
class BacklogQuota:
    limit_size: int  # bytes; -1: no size limit
    limit_time: int  # seconds; -1: no time limit (not enforced here)
    policy: QuotaPolicy

    @classmethod
    def parse(cls, body: Any) -> BacklogQuota:
        """Pulsar's ``BacklogQuota`` JSON: ``{"limitSize": bytes, "limitTime": s, "policy": "..."}``."""
        if not isinstance(body, dict):
            raise InvalidRequest("A backlog quota is a JSON object with limitSize, limitTime and policy")
        try:
            policy = QuotaPolicy(str(body.get("policy", "producer_request_hold")).lower())
        except ValueError:
            raise InvalidRequest(f"Unknown backlog quota policy {body.get('policy')!r}") from None
        size, time_s = body.get("limitSize", body.get("limit", -1)), body.get("limitTime", -1)
        if not isinstance(size, int) or not isinstance(time_s, int) or isinstance(size, bool) or min(size, time_s) < -1:
            raise InvalidRequest("limitSize and limitTime must be integers >= -1")
        return cls(size, time_s, policy)

    def rest(self) -> dict[str, Any]:
        return {"limitSize": self.limit_size, "limitTime": self.limit_time, "policy": self.policy.value}


def backlog_bytes(entries: int, total_entries: int, total_bytes: int) -> int:
    """A backlog's estimated size: its entries at the topic's mean entry size."""
    return entries * total_bytes // total_entries if total_entries > 0 else 0


def quota_refusal(quota: BacklogQuota, topic: str, what: str) -> BrokerError | None:
    """The error a new producer gets on a topic whose backlog exceeds ``quota`` (``what``: by how much)."""
    text = f"Cannot create producer on topic {topic} with backlog quota exceeded ({what})"
    if quota.policy is QuotaPolicy.PRODUCER_REQUEST_HOLD:
        return ProducerBlockedQuotaExceededError(text)
    if quota.policy is QuotaPolicy.PRODUCER_EXCEPTION:
        return ProducerBlockedQuotaExceededException(text)
    return None
