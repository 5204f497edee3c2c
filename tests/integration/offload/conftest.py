"""A broker with tiered storage on: the S3 driver against ``moto[server]`` on loopback, or the filesystem
driver; small ledgers (5 entries) and small blocks so every test spans several of each."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

from magnetar.cli import admin as admin_cli
from tests import s3_server
from tests.integration.admin.http import call
from tests.integration.broker_process import BrokerProcess
from tests.s3_server import CREDENTIALS

moto = s3_server.moto  # the module-scoped S3 server fixture

WAIT_S = 30.0
BUCKET = "magnetar-offload"

BASE_ARGS = (
    "--set", "managedLedgerMaxEntriesPerLedger=5",
    "--set", "managedLedgerOffloadMaxBlockSizeInBytes=2048",
    "--set", "managedLedgerOffloadReadBufferSizeInBytes=1024",
    "--set", "managedLedgerOffloadDeletionLagMs=0",
    "--set", "retentionCheckIntervalInSeconds=1",
    "--set", "defaultRetentionTimeInMinutes=-1",
    "--set", "defaultRetentionSizeInMB=-1",
    "--set", "dispatcherReadFailureBackoffInitialTimeInMs=100",
    "--set", "dispatcherReadFailureBackoffMaxTimeInMs=1000",
)


def s3_args(endpoint: str, bucket: str = BUCKET) -> tuple[str, ...]:
    return (*BASE_ARGS, "--set", "managedLedgerOffloadDriver=aws-s3",
            "--set", f"managedLedgerOffloadBucket={bucket}", "--set", "managedLedgerOffloadRegion=us-east-1",
            "--set", f"managedLedgerOffloadServiceEndpoint={endpoint}")


def fs_args(directory: Path) -> tuple[str, ...]:
    return (*BASE_ARGS, "--set", "managedLedgerOffloadDriver=filesystem", "--set", f"fileSystemURI={directory}")


def admin(broker: BrokerProcess, *argv: str) -> tuple[int, str]:
    """``magnetar admin`` in-process (exit code, stdout)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = admin_cli.main(["--admin-url", broker.web_url, *argv])
    return code, out.getvalue()


def internal_stats(broker: BrokerProcess, topic: str) -> dict[str, Any]:
    status, stats = call(broker.web_url, "GET", f"/admin/v2/persistent/public/default/{topic}/internalStats")
    assert status == 200, stats
    assert isinstance(stats, dict)
    return stats


def start_broker(data_dir: Path, args: tuple[str, ...]) -> BrokerProcess:
    return BrokerProcess(data_dir, extra_args=args, env=dict(CREDENTIALS)).start()
