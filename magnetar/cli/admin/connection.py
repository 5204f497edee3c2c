"""How ``magnetar admin`` reaches the broker: the admin URL, credentials and TLS, from pulsar-admin's flags
(``--admin-url``, ``--auth-plugin``, ``--auth-params``, ``--tls-trust-cert-path``, ``--tls-allow-insecure``)
or a ``client.conf`` (``--conf``: ``webServiceUrl``, ``authPlugin``, ``authParams``,
``tlsTrustCertsFilePath``, ``tlsAllowInsecureConnection``, ``tlsEnableHostnameVerification``); without
``--conf``, the file ``PULSAR_CLIENT_CONF`` names, as pulsar-admin reads it. Flags win over the file."""

from __future__ import annotations

import argparse
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from magnetar.client.auth import from_plugin
from magnetar.client.errors import InvalidConfiguration

DEFAULT_ADMIN_URL = "http://localhost:8080"


class ConnectionSettingsError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class AdminConnection:
    url: str = DEFAULT_ADMIN_URL
    headers: dict[str, str] = field(default_factory=dict)
    context: ssl.SSLContext | None = None


def add_connection_options(admin: argparse.ArgumentParser) -> None:
    admin.add_argument("--admin-url", default=None, help=f"admin HTTP(S) URL (default {DEFAULT_ADMIN_URL})")
    admin.add_argument("--conf", type=Path, default=None,
                       help="a client.conf with webServiceUrl, authPlugin, ... (default: $PULSAR_CLIENT_CONF)")
    admin.add_argument("--auth-plugin", default=None,
                       help="org.apache.pulsar.client.impl.auth.AuthenticationToken|AuthenticationBasic|AuthenticationTls")
    admin.add_argument("--auth-params", default=None,
                       help='token:<jwt>, file:///path, {"userId":..,"password":..} or tlsCertFile:..,tlsKeyFile:..')
    admin.add_argument("--tls-trust-cert-path", default=None, help="CA certificates that sign the broker's")
    admin.add_argument("--tls-allow-insecure", action="store_true", default=None,
                       help="accept any broker certificate")


def read_client_conf(path: Path) -> dict[str, str]:
    """``key=value`` lines of a client.conf (``#`` comments); read here, not through magnetar.config, so the
    admin command does not load the broker."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConnectionSettingsError(f"cannot read {path}: {exc.strerror}") from exc
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and not line.lstrip().startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def connection_from_args(args: argparse.Namespace) -> AdminConnection:
    conf: dict[str, str] = {}
    conf_path = args.conf or (Path(os.environ["PULSAR_CLIENT_CONF"]) if os.environ.get("PULSAR_CLIENT_CONF") else None)
    if conf_path is not None:
        conf = read_client_conf(conf_path)
    url = args.admin_url or conf.get("webServiceUrl") or DEFAULT_ADMIN_URL
    plugin = args.auth_plugin if args.auth_plugin is not None else conf.get("authPlugin", "")
    params = args.auth_params if args.auth_params is not None else conf.get("authParams", "")
    try:
        auth = from_plugin(plugin, params) if plugin else None
    except InvalidConfiguration as exc:
        raise ConnectionSettingsError(str(exc)) from exc
    context = None
    if url.startswith("https://"):
        trust = args.tls_trust_cert_path or conf.get("tlsTrustCertsFilePath") or None
        insecure = args.tls_allow_insecure or conf.get("tlsAllowInsecureConnection", "false").lower() == "true"
        context = ssl.create_default_context(cafile=trust)
        if insecure or conf.get("tlsEnableHostnameVerification", "true").lower() == "false":
            context.check_hostname = False
        if insecure:
            context.verify_mode = ssl.CERT_NONE
        if auth is not None and auth.tls_cert_file and auth.tls_key_file:
            context.load_cert_chain(auth.tls_cert_file, auth.tls_key_file)
    return AdminConnection(url, auth.http_headers() if auth is not None else {}, context)
