"""TLS contexts from PEM settings (Kafka's ``DefaultSslEngineFactory`` with PEM stores).

Python's ``ssl`` module does the TLS: ``ssl.enabled.protocols`` becomes the context's
minimum and maximum version; ``ssl.client.auth`` ``none``/``requested``/``required``
becomes ``CERT_NONE``/``CERT_OPTIONAL``/``CERT_REQUIRED``; ``ssl.cipher.suites`` are
given to OpenSSL for TLS 1.2 (OpenSSL's names, e.g. ``ECDHE-ECDSA-AES128-GCM-SHA256``).
Python cannot restrict the TLS 1.3 suites, so a list naming TLS 1.3 suites
(``TLS_AES_128_GCM_SHA256``...) must name all of OpenSSL's, or TLS 1.3 must be disabled;
otherwise the context is refused. Inline PEM (``ssl.keystore.certificate.chain`` /
``ssl.keystore.key``) is written to a private temporary file for the time of loading.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from kpo_broker.security.config import SslSettings

__all__ = ["TlsConfigError", "client_context", "server_context"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_TLS13_SUITES = {"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


class TlsConfigError(ValueError):
    """TLS settings that cannot be applied.

    Attributes:
        property_name: the Kafka property at fault.
    """

    def __init__(self, property_name: str, message: str) -> None:
        super().__init__(f"{property_name}: {message}")
        self.property_name = property_name


def _configure(context: ssl.SSLContext, settings: SslSettings) -> None:
    versions = sorted(_VERSIONS[p] for p in settings.enabled_protocols)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]
    if settings.cipher_suites:
        tls13 = [s for s in settings.cipher_suites if s in _TLS13_SUITES]
        others = [s for s in settings.cipher_suites if s not in _TLS13_SUITES]
        if "TLSv1.3" in settings.enabled_protocols and set(tls13) != _TLS13_SUITES:
            raise TlsConfigError(
                "ssl.cipher.suites",
                "TLS 1.3 suites cannot be restricted here; list all of "
                f"{', '.join(sorted(_TLS13_SUITES))} or disable TLSv1.3",
            )
        if others:
            try:
                context.set_ciphers(":".join(others))
            except ssl.SSLError:
                raise TlsConfigError(
                    "ssl.cipher.suites", f"no usable cipher among {', '.join(others)}"
                ) from None
        elif "TLSv1.2" in settings.enabled_protocols:
            raise TlsConfigError(
                "ssl.cipher.suites", "no TLS 1.2 cipher suite while TLSv1.2 is enabled"
            )
    if settings.truststore_location:
        try:
            context.load_verify_locations(cafile=settings.truststore_location)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError("ssl.truststore.location", str(exc)) from None
    elif settings.truststore_certificates:
        try:
            context.load_verify_locations(cadata=settings.truststore_certificates)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError("ssl.truststore.certificates", str(exc)) from None
    else:
        context.load_default_certs(
            ssl.Purpose.CLIENT_AUTH
            if context.protocol == ssl.PROTOCOL_TLS_SERVER
            else ssl.Purpose.SERVER_AUTH
        )
    _load_keystore(context, settings)


def _load_keystore(context: ssl.SSLContext, settings: SslSettings) -> None:
    if settings.keystore_location:
        try:
            context.load_cert_chain(settings.keystore_location, password=settings.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError("ssl.keystore.location", _reason(exc)) from None
    elif settings.keystore_certificate_chain and settings.keystore_key:
        with tempfile.TemporaryDirectory(prefix="kpo-tls-") as folder:
            path = Path(folder) / "keystore.pem"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as stream:
                stream.write(settings.keystore_key.strip() + "\n")
                stream.write(settings.keystore_certificate_chain.strip() + "\n")
            try:
                context.load_cert_chain(str(path), password=settings.key_password)
            except (OSError, ssl.SSLError) as exc:
                raise TlsConfigError("ssl.keystore.key", _reason(exc)) from None


def _reason(exc: BaseException) -> str:
    """Return an ``ssl`` error's reason, without anything the key password could appear in."""
    return getattr(exc, "reason", None) or type(exc).__name__


def server_context(settings: SslSettings) -> ssl.SSLContext:
    """Build a listener's server-side context.

    Raises:
        TlsConfigError: unreadable keystore or truststore, wrong key password, unusable
            cipher suites.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure(context, settings)
    context.verify_mode = _CLIENT_AUTH[settings.client_auth]
    return context


def client_context(settings: SslSettings) -> ssl.SSLContext:
    """Build the context of this broker's connections to other brokers (mutual TLS).

    The keystore, when set, gives the client certificate; the server's host name is
    checked when ``ssl.endpoint.identification.algorithm`` is ``https``.

    Raises:
        TlsConfigError: as :func:`server_context`.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = settings.endpoint_identification == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _configure(context, settings)
    return context
