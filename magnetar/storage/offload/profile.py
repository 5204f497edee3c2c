"""``fileSystemProfilePath``: the Hadoop-style XML profile Pulsar's filesystem offloader reads.

A profile is ``<configuration><property><name>N</name><value>V</value></property>...</configuration>``;
``fileSystemProfilePath`` may name several, comma-separated, later ones overriding earlier ones (as Hadoop
adds resources). What maps to the ``filesystem`` driver:

* ``fs.defaultFS`` (a ``file://`` URI, or a plain path) and ``hadoop.tmp.dir`` (Pulsar's storage base path):
  the offload directory when ``fileSystemURI`` is unset. An absolute ``hadoop.tmp.dir`` is the directory; a
  relative one is taken under ``fs.defaultFS``'s path;
* ``io.file.buffer.size``: bytes per read (``managedLedgerOffloadReadBufferSizeInBytes``) unless that key is
  set explicitly.

Everything else in a profile (HDFS, S3A, Kerberos keys) is ignored: only local directories are supported
here, and a ``fs.defaultFS`` of another scheme is an error. ``${var}`` references are not expanded.
Bytes in, values out: the caller reads the files (``config.py``).
"""

from __future__ import annotations

import dataclasses
import posixpath
import xml.etree.ElementTree as ET
from collections.abc import Collection, Mapping
from urllib.parse import urlparse

from magnetar.storage.offload.api import OffloadSettings

#: Properties read from one profile, at most (a Hadoop core-site.xml has a few dozen).
PROFILE_PROPERTIES_MAX = 10_000


class ProfileError(ValueError):
    """A profile that cannot be used; the message names the file and the reason."""


def parse_profile(data: bytes, where: str) -> dict[str, str]:
    """The ``name -> value`` pairs of one profile (a property without a value maps to "")."""
    try:
        root = ET.fromstring(data)  # the operator's own configuration file, not network input
    except ET.ParseError as exc:
        raise ProfileError(f"{where}: not valid XML: {exc}") from exc
    if root.tag != "configuration":
        raise ProfileError(f"{where}: the root element is <{root.tag}>, expected <configuration>")
    found: dict[str, str] = {}
    for prop in root.findall("property")[:PROFILE_PROPERTIES_MAX]:
        name = (prop.findtext("name") or "").strip()
        if not name:
            raise ProfileError(f"{where}: a <property> without a <name>")
        found[name] = (prop.findtext("value") or "").strip()
    return found


def _directory(props: Mapping[str, str], where: str) -> str:
    default_fs = props.get("fs.defaultFS", "")
    base = ""
    if default_fs:
        parsed = urlparse(default_fs)
        if parsed.scheme not in ("", "file"):
            raise ProfileError(
                f"{where}: fs.defaultFS {default_fs!r}: only local directories (file://) are supported"
            )
        base = parsed.path if parsed.scheme else default_fs
    tmp_dir = props.get("hadoop.tmp.dir", "")
    if tmp_dir.startswith("/"):
        return tmp_dir
    if tmp_dir and base:
        return posixpath.join(base, tmp_dir)
    return base


def apply_profile(
    settings: OffloadSettings, props: Mapping[str, str], explicit: Collection[str], where: str
) -> OffloadSettings:
    """``settings`` with what the profile says; ``explicit`` names the settings fields the operator set
    (those win over the profile)."""
    changes: dict[str, object] = {}
    if not settings.filesystem_uri:
        directory = _directory(props, where)
        if not directory:
            raise ProfileError(f"{where}: neither fileSystemURI nor the profile's fs.defaultFS / hadoop.tmp.dir "
                               "names a directory")
        changes["filesystem_uri"] = directory
    buffer_text = props.get("io.file.buffer.size", "")
    if buffer_text and "read_buffer_size_bytes" not in explicit:
        try:
            buffer_bytes = int(buffer_text)
        except ValueError as exc:
            raise ProfileError(f"{where}: io.file.buffer.size {buffer_text!r} is not a number") from exc
        if buffer_bytes <= 0:
            raise ProfileError(f"{where}: io.file.buffer.size must be positive, got {buffer_bytes}")
        changes["read_buffer_size_bytes"] = buffer_bytes
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
