"""Unique topic names, so tests sharing one broker never see each other's data."""

from __future__ import annotations

import uuid


def topic_name(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"
