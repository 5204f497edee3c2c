"""magnetar reads Pulsar's configuration keys under Pulsar's spelling, and a Pulsar conf file starts it quietly.

The Pulsar key names are stored test data (``data/pulsar_conf_keys.txt``: Pulsar's broker.conf and standalone.conf,
and the keys Pulsar reads outside them), never fetched at test time.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from magnetar.config import build_settings, key_targets, known_keys
from magnetar.config_ignored import Ignored
from magnetar.config_reference import ALIASES, MAGNETAR_KEYS, MEANINGS, reference_markdown

DATA = Path(__file__).parent / "data" / "pulsar_conf_keys.txt"


def pulsar_keys() -> set[str]:
    lines = DATA.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def test_every_key_read_is_spelled_as_pulsar_spells_it() -> None:
    pulsar = pulsar_keys()
    assert len(pulsar) > 400
    misspelled = [key for key in known_keys() if key not in pulsar and key not in MAGNETAR_KEYS and key not in ALIASES]
    assert not misspelled, f"keys neither Pulsar's nor listed as magnetar's own: {misspelled}"
    claimed = sorted(MAGNETAR_KEYS & pulsar)
    assert not claimed, f"Pulsar has these keys: do not list them as magnetar's own: {claimed}"
    assert set(MAGNETAR_KEYS) <= set(known_keys()), sorted(MAGNETAR_KEYS - set(known_keys()))
    for alias, key in ALIASES.items():
        assert alias in known_keys() and key in known_keys() and key in pulsar, (alias, key)


def test_every_pulsar_key_is_read_or_accounted_for() -> None:
    ignored = Ignored.of(pulsar_keys() - set(known_keys()))
    assert ignored.unknown == []


@pytest.mark.parametrize("key", ["isSchemaValidationEnforced", "schemaValidationEnforced"])
def test_schema_validation_under_pulsars_name_and_the_old_one(key: str) -> None:
    assert build_settings({}).broker.schema_validation_enforced is False
    assert build_settings({key: "true"}).broker.schema_validation_enforced is True


def test_a_pulsar_standalone_conf_is_summed_up_in_one_line(caplog: pytest.LogCaptureFixture) -> None:
    values = {key: "1" for key in pulsar_keys()} | {"clusterName": "standalone", "brokerServicePort": "6650"}
    values = {key: text for key, text in values.items() if key not in known_keys() or key in ("clusterName",)}
    with caplog.at_level(logging.INFO, logger="magnetar.config"):
        build_settings(values)
    records = [r for r in caplog.records if r.name == "magnetar.config"]
    assert [r.levelno for r in records] == [logging.INFO]
    line = records[0].getMessage()
    assert line.startswith(f"ignoring {len(values) - 1} Pulsar configuration keys")
    assert "BookKeeper: " in line and "ZooKeeper and the metadata store: " in line
    assert "publish rate limits: 7" in line


def test_keys_nobody_knows_are_named_in_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="magnetar.config"):
        build_settings({"brokerServicePorts": "6650", "bookkeeperClientTimeoutInSeconds": "30", "emptyOne": ""})
    levels = {r.levelno: r.getMessage() for r in caplog.records if r.name == "magnetar.config"}
    assert levels[logging.WARNING] == "ignoring 1 unknown configuration keys: brokerServicePorts"
    assert levels[logging.INFO].startswith("ignoring 1 Pulsar configuration keys; 1 for parts magnetar does not have")


def test_every_key_has_a_meaning_in_the_reference() -> None:
    targets = key_targets()
    described = {key for keys in MEANINGS.values() for key in keys}
    assert described <= set(targets), sorted(described - set(targets))
    covered = {key for key in targets if any(targets[key][:2] == targets[d][:2] for d in described)}
    missing = sorted(set(targets) - covered)
    assert not missing, f"add these keys to MEANINGS in magnetar/config_reference.py: {missing}"
    text = reference_markdown()
    assert all(f"`{key}`" in text for key in targets)
    assert "| `isSchemaValidationEnforced`, `schemaValidationEnforced` | `false` |" in text
