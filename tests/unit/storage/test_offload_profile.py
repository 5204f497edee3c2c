"""fileSystemProfilePath: the Hadoop XML profile read by the filesystem offload driver."""

from __future__ import annotations

from pathlib import Path

import pytest

from magnetar.config import ConfigError, build_settings
from magnetar.storage.offload.profile import ProfileError, parse_profile


def _profile(path: Path, props: dict[str, str]) -> str:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    path.write_text(f'<?xml version="1.0"?>\n<configuration>{body}</configuration>\n')
    return str(path)


def _offload(values: dict[str, str]):  # type: ignore[no-untyped-def]
    return build_settings({"managedLedgerOffloadDriver": "filesystem", **values}).broker.offload


def test_default_fs_and_buffer_size_come_from_the_profile(tmp_path: Path) -> None:
    profile = _profile(tmp_path / "core-site.xml",
                       {"fs.defaultFS": f"file://{tmp_path}/store", "io.file.buffer.size": "65536",
                        "dfs.replication": "3"})
    offload = _offload({"fileSystemProfilePath": profile})
    assert offload.filesystem_uri == f"{tmp_path}/store"
    assert offload.read_buffer_size_bytes == 65536


def test_hadoop_tmp_dir_is_the_base_path_and_later_profiles_win(tmp_path: Path) -> None:
    first = _profile(tmp_path / "a.xml", {"fs.defaultFS": "file:///srv", "io.file.buffer.size": "4096"})
    second = _profile(tmp_path / "b.xml", {"hadoop.tmp.dir": "pulsar", "io.file.buffer.size": "8192"})
    offload = _offload({"fileSystemProfilePath": f"{first},{second}"})
    assert (offload.filesystem_uri, offload.read_buffer_size_bytes) == ("/srv/pulsar", 8192)
    absolute = _profile(tmp_path / "c.xml", {"fs.defaultFS": "file:///srv", "hadoop.tmp.dir": "/var/tiered"})
    assert _offload({"fileSystemProfilePath": absolute}).filesystem_uri == "/var/tiered"


def test_explicit_keys_win_over_the_profile(tmp_path: Path) -> None:
    profile = _profile(tmp_path / "p.xml", {"fs.defaultFS": "file:///ignored", "io.file.buffer.size": "65536"})
    offload = _offload({"fileSystemProfilePath": profile, "fileSystemURI": "/chosen",
                        "managedLedgerOffloadReadBufferSizeInBytes": "1024"})
    assert (offload.filesystem_uri, offload.read_buffer_size_bytes) == ("/chosen", 1024)


def test_the_profile_is_ignored_by_other_drivers(tmp_path: Path) -> None:
    settings = build_settings({"managedLedgerOffloadDriver": "aws-s3",
                               "fileSystemProfilePath": str(tmp_path / "absent.xml")})
    assert settings.broker.offload.filesystem_uri == ""


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "cannot read"),
        ("<configuration><property>", "not valid XML"),
        ("<props/>", "expected <configuration>"),
        ("<configuration><property><value>x</value></property></configuration>", "without a <name>"),
        ("<configuration><property><name>fs.defaultFS</name><value>hdfs://nn:8020</value></property>"
         "</configuration>", "only local directories"),
        ("<configuration><property><name>io.file.buffer.size</name><value>big</value></property>"
         "<property><name>fs.defaultFS</name><value>/d</value></property></configuration>", "not a number"),
        ("<configuration/>", "names a directory"),
    ],
)
def test_a_missing_or_invalid_profile_is_a_clear_startup_error(tmp_path: Path, content: str | None,
                                                                reason: str) -> None:
    path = tmp_path / "profile.xml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match="fileSystemProfilePath") as caught:
        _offload({"fileSystemProfilePath": str(path)})
    assert reason in str(caught.value)


def test_parse_profile_keeps_empty_values() -> None:
    data = b"<configuration><property><name>a</name></property><property><name>b</name><value> 1 </value>" \
           b"</property></configuration>"
    assert parse_profile(data, "p") == {"a": "", "b": "1"}
    with pytest.raises(ProfileError):
        parse_profile(b"", "p")
