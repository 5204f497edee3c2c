"""``ledgerStoreUrl`` and the other ``ledgerStore*`` keys, parsed into the standalone settings."""

from __future__ import annotations

import pytest

from magnetar.config import ConfigError, build_settings
from magnetar.storage.objectstore import LedgerStoreUrl, ObjectLedgerSettings, parse_ledger_store_url


@pytest.mark.parametrize(("url", "expected"), [
    ("embedded:", LedgerStoreUrl("embedded")),
    ("embedded", LedgerStoreUrl("embedded")),
    ("s3://my-bucket", LedgerStoreUrl("s3", "my-bucket", "")),
    ("s3://my-bucket/", LedgerStoreUrl("s3", "my-bucket", "")),
    ("s3://my-bucket/cluster-a/ledgers/", LedgerStoreUrl("s3", "my-bucket", "cluster-a/ledgers/")),
])
def test_urls(url: str, expected: LedgerStoreUrl) -> None:
    assert parse_ledger_store_url(url) == expected


@pytest.mark.parametrize("url", ["s3://", "s3://UPPER", "gs://bucket", "file:///tmp", "s3://a"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(ValueError):
        parse_ledger_store_url(url)


def test_the_keys_reach_the_settings() -> None:
    settings = build_settings({
        "ledgerStoreUrl": "s3://ledgers/prod", "ledgerStoreServiceEndpoint": "http://minio:9000",
        "ledgerStoreRegion": "eu-west-1", "ledgerStoreFlushMaxDelayMillis": "0", "ledgerStoreFlushMaxBytes": "65536",
        "ledgerStoreReadCacheSizeBytes": "0", "ledgerStoreRequestTimeoutMillis": "2500",
    })
    config = settings.ledger_store
    assert config.url == LedgerStoreUrl("s3", "ledgers", "prod/")
    assert (config.service_endpoint, config.region, config.request_timeout_ms) == ("http://minio:9000", "eu-west-1",
                                                                                   2500)
    assert config.tuning() == ObjectLedgerSettings(flush_max_delay_ms=0, flush_max_bytes=65536, read_cache_bytes=0)
    assert not build_settings({}).ledger_store.url.shared


@pytest.mark.parametrize(("key", "value"), [("ledgerStoreUrl", "gs://x"), ("ledgerStoreFlushMaxDelayMillis", "-1"),
                                            ("ledgerStoreFlushMaxBytes", "0")])
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        build_settings({key: value})
