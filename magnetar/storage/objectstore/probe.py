"""The startup check: does this service honour conditional creates? The ledger fence depends on it.

Two creates of one fresh probe key with ``If-None-Match: *``: the first must succeed, the second must be
refused (412). A service that lets the second one through would let a deposed writer overwrite the seal
that fences it, and acknowledged messages could be lost, so the store refuses to start, saying why. AWS S3
honours the header since August 2024, MinIO and moto (5.0.x on) do too; older or partial S3 look-alikes
may not. The probe key is deleted afterwards (best effort). Knows nothing of ledgers.
"""

from __future__ import annotations

import contextlib
import logging

from magnetar.storage.api import StorageIOError
from magnetar.storage.objectstore.api import ObjectClient, ObjectExists, ObjectStoreError, ObjectStoreRefused

log = logging.getLogger("magnetar.storage")


def probe_key(prefix: str, token: bytes) -> str:
    return f"{prefix}probe/{token.hex()}"


async def probe_conditional_writes(client: ObjectClient, prefix: str, token: bytes) -> None:
    key = probe_key(prefix, token)
    try:
        await client.put_if_absent(key, b"first create: must succeed")
    except ObjectExists as exc:
        raise ObjectStoreRefused(f"object store probe: {key} exists before it was created; is another process "
                                 "using this store's token?") from exc
    except ObjectStoreRefused:
        raise
    except ObjectStoreError as exc:
        raise StorageIOError(f"object store probe: cannot create {key}: {exc}") from exc
    try:
        await client.put_if_absent(key, b"second create: must be refused")
    except ObjectExists:
        log.debug("object store probe: conditional creates are honoured")
    except ObjectStoreError as exc:
        raise StorageIOError(f"object store probe: the second create of {key} failed: {exc}") from exc
    else:
        raise ObjectStoreRefused(
            f"the object store does not honour conditional writes: a second create of {key} with "
            "'If-None-Match: *' succeeded instead of failing with 412 Precondition Failed. Ledgers are fenced "
            "with conditional creates; without them a deposed broker could overwrite acknowledged messages. "
            "Use a service that honours them (AWS S3 since 2024-08, MinIO, moto 5.0.x+) or ledgerStoreUrl=embedded:"
        )
    finally:
        with contextlib.suppress(ObjectStoreError):
            await client.delete([key])
