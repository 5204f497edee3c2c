"""TLS for both listeners (``pulsar+ssl://`` and ``https://``) with the standard ``ssl`` module.

One server context is built from ``tlsCertificateFilePath``/``tlsKeyFilePath``; with
``tlsTrustCertsFilePath`` it asks clients for a certificate (required with
``tlsRequireTrustedClientCertOnConnect``, else optional) and verifies it against those CAs; with
``tlsAllowInsecureConnection`` it does not ask. ``tlsProtocols`` bounds the versions, ``tlsCiphers``
chooses the TLS 1.2 suites. :class:`CertReloader` reloads the files into the same context when they
change (checked every ``tlsCertRefreshCheckDurationSec``): new handshakes use the new certificate,
established connections keep theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from pathlib import Path

from magnetar.server.auth.settings import SecuritySettings

log = logging.getLogger("magnetar.server.tls")

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


def server_context(settings: SecuritySettings) -> ssl.SSLContext:
    """The listeners' context; ValueError/OSError name a bad setting or an unreadable file."""
    if not settings.tls_certificate_file or not settings.tls_key_file:
        raise ValueError("TLS listeners need tlsCertificateFilePath and tlsKeyFilePath")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load(ctx, settings)
    if settings.tls_protocols:
        try:
            versions = sorted(_VERSIONS[p.strip()] for p in settings.tls_protocols)
        except KeyError as exc:
            raise ValueError(f"unknown tlsProtocols entry {exc.args[0]!r}: use {', '.join(_VERSIONS)}") from None
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if settings.tls_ciphers:
        ctx.set_ciphers(":".join(c.strip() for c in settings.tls_ciphers))
    if settings.tls_allow_insecure_connection or not settings.tls_trust_certs_file:
        ctx.verify_mode = ssl.CERT_NONE
    elif settings.tls_require_trusted_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
    else:
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


def _load(ctx: ssl.SSLContext, settings: SecuritySettings) -> None:
    ctx.load_cert_chain(settings.tls_certificate_file, settings.tls_key_file)
    if settings.tls_trust_certs_file:
        ctx.load_verify_locations(settings.tls_trust_certs_file)


def peer_certificate(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> bytes | None:
    """The DER certificate a TLS client presented (and the context verified), if any."""
    if ssl_object is None:
        return None
    return ssl_object.getpeercert(binary_form=True)


class CertReloader:
    """Reload the certificate, key and trust files into ``ctx`` when their modification times change."""

    def __init__(self, ctx: ssl.SSLContext, settings: SecuritySettings) -> None:
        self.ctx = ctx
        self.settings = settings
        self.reloads = 0
        self._stamps = self._read_stamps()
        self._task: asyncio.Task[None] | None = None

    def _files(self) -> list[str]:
        s = self.settings
        return [f for f in (s.tls_certificate_file, s.tls_key_file, s.tls_trust_certs_file) if f]

    def _read_stamps(self) -> tuple[float, ...]:
        stamps = []
        for f in self._files():
            try:
                stamps.append(Path(f).stat().st_mtime)
            except OSError:
                stamps.append(-1.0)
        return tuple(stamps)

    def check(self) -> bool:
        """Reload if a file changed; True when a reload happened. A failed reload keeps the old files."""
        stamps = self._read_stamps()
        if stamps == self._stamps:
            return False
        try:
            _load(self.ctx, self.settings)
        except (OSError, ssl.SSLError, ValueError) as exc:
            log.warning("TLS certificate files changed but cannot be loaded (keeping the old ones): %s", exc)
            return False
        self._stamps = stamps
        self.reloads += 1
        log.info("TLS certificate reloaded from %s", self.settings.tls_certificate_file)
        return True

    def start(self) -> None:
        if self.settings.tls_cert_refresh_check_seconds > 0:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.tls_cert_refresh_check_seconds)
            self.check()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
