"""magnetar.conf (properties or TOML) and --set flags, with Pulsar's broker.conf names."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetar.app.settings import StandaloneSettings
from magnetar.config import ConfigError, build_settings, parse_overrides, read_file


def test_properties_file_with_comments_and_pulsar_names(tmp_path: Path) -> None:
    conf = tmp_path / "magnetar.conf"
    conf.write_text(
        "# a broker.conf excerpt\n"
        "clusterName=east\n"
        "brokerServicePort = 7650\n"
        "journalSyncData=false\n"
        "managedLedgerMaxSizePerLedgerMbytes=16\n"
        "managedLedgerMaxLedgerRolloverTimeMinutes=5\n"
        "zookeeperServers=zk:2181\n"  # a Pulsar key magnetar does not use: ignored
    )
    settings = build_settings(read_file(conf))
    assert settings.broker.cluster_name == "east"
    assert settings.broker_port == 7650
    assert settings.journal_sync_data is False
    assert settings.broker.managed_ledger.max_size_per_ledger_bytes == 16 * 1024 * 1024
    assert settings.broker.managed_ledger.max_ledger_rollover_time_ms == 5 * 60_000


def test_toml_file_and_set_flags_win(tmp_path: Path) -> None:
    conf = tmp_path / "magnetar.toml"
    conf.write_text('clusterName = "west"\nallowAutoTopicCreation = false\ndefaultNumPartitions = 4\n')
    values = read_file(conf)
    values.update(parse_overrides(["allowAutoTopicCreation=true", "maxMessageSize=2048"]))
    settings = build_settings(values, StandaloneSettings(data_dir=tmp_path))
    assert settings.broker.cluster_name == "west"
    assert settings.broker.allow_auto_topic_creation is True
    assert settings.broker.default_num_partitions == 4
    assert settings.broker.max_message_size == 2048
    assert settings.data_dir == tmp_path


@pytest.mark.parametrize(
    ("key", "value"),
    [("journalSyncData", "maybe"), ("brokerServicePort", "eighty"), ("allowAutoTopicCreationType", "sometimes")],
)
def test_a_bad_value_names_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        build_settings({key: value})


def test_malformed_inputs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        parse_overrides(["no-equals-sign"])
    bad = tmp_path / "bad.conf"
    bad.write_text("just words\n")
    with pytest.raises(ConfigError, match=r"bad\.conf:1"):
        read_file(bad)
    with pytest.raises(ConfigError):
        read_file(tmp_path / "missing.conf")


def test_tiered_storage_keys_with_pulsars_names() -> None:
    from magnetar.config import ConfigError, build_settings

    settings = build_settings({
        "managedLedgerOffloadDriver": "S3", "s3ManagedLedgerOffloadBucket": "b",
        "s3ManagedLedgerOffloadRegion": "eu-west-1", "managedLedgerOffloadServiceEndpoint": "http://127.0.0.1:9000",
        "managedLedgerOffloadMaxBlockSizeInBytes": "1048576", "s3ManagedLedgerOffloadReadBufferSizeInBytes": "4096",
        "managedLedgerOffloadAutoTriggerSizeThresholdBytes": "0", "managedLedgerOffloadDeletionLagMs": "1000",
    })
    offload = settings.broker.offload
    assert (offload.driver, offload.bucket, offload.region, offload.service_endpoint) == (
        "s3", "b", "eu-west-1", "http://127.0.0.1:9000")
    assert (offload.max_block_size_bytes, offload.read_buffer_size_bytes) == (1048576, 4096)
    assert settings.broker.managed_ledger_offload_auto_trigger_size_threshold_bytes == 0
    assert settings.broker.managed_ledger_offload_deletion_lag_ms == 1000
    assert build_settings({"fileSystemURI": "file:///data/offload"}).broker.offload.filesystem_uri
    import pytest

    with pytest.raises(ConfigError, match="managedLedgerOffloadDriver"):
        build_settings({"managedLedgerOffloadDriver": "google-cloud-storage"})


def test_metadata_store_keys() -> None:
    from magnetar.metadata.settings import SessionExpiredPolicy, StoreKind

    settings = build_settings({
        "metadataStoreUrl": "zk:zk1:2181,zk2:2181/magnetar",
        "configurationMetadataStoreUrl": "zk:zk1:2181,zk2:2181/magnetar",
        "metadataStoreSessionTimeoutMillis": "10000",
        "metadataStoreOperationTimeoutSeconds": "5",
        "zookeeperSessionExpiredPolicy": "shutdown",
    })
    m = settings.metadata
    assert (m.kind, m.session_timeout_ms, m.operation_timeout_s) == (StoreKind.ZOOKEEPER, 10_000, 5)
    assert m.session_expired_policy is SessionExpiredPolicy.SHUTDOWN
    defaults = build_settings({}).metadata
    assert (defaults.kind, defaults.session_timeout_ms, defaults.operation_timeout_s) == (StoreKind.SQLITE, 30_000, 30)
    assert defaults.session_expired_policy is SessionExpiredPolicy.RECONNECT
    assert build_settings({"metadataStoreUrl": "zk1:2181"}).metadata.kind is StoreKind.ZOOKEEPER, "Pulsar's default"
    assert build_settings({"metadataStoreUrl": "sqlite:/var/lib/m.db"}).metadata.kind is StoreKind.SQLITE


@pytest.mark.parametrize(("values", "message"), [
    ({"metadataStoreUrl": "etcd:http://e:2379"}, "metadataStoreUrl"),
    ({"metadataStoreUrl": "zk:zk1"}, "metadataStoreUrl"),
    ({"metadataStoreSessionTimeoutMillis": "0"}, "metadataStoreSessionTimeoutMillis"),
    ({"zookeeperSessionExpiredPolicy": "ignore"}, "zookeeperSessionExpiredPolicy"),
    ({"metadataStoreUrl": "zk:a:1", "configurationMetadataStoreUrl": "zk:b:1"}, "configurationMetadataStoreUrl"),
])
def test_bad_metadata_store_keys_are_refused_naming_the_key(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_settings(values)
