"""Kafka errors as kpo's own types: error codes, result texts and exceptions.

kafka-python reports failures three ways: error codes in responses, ``"[Error N] Name:
message"`` texts in ``alter_configs`` results, and raised ``KafkaError`` subclasses. This
module turns each into :class:`~kpo_kafka.admin_types.ApiError` values or the
``KafkaAdminError`` family (error codes from the Kafka protocol guide).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import kafka.errors as kafka_errors

from kpo_kafka.acls import AUTHORIZATION_ERRORS, refusal
from kpo_kafka.admin_types import (
    ApiError,
    KafkaAuthenticationError,
    KafkaAuthorizationError,
    KafkaRequestError,
    KafkaUnavailableError,
    KafkaUnsupportedError,
)

__all__ = [
    "api_error",
    "authorization_error",
    "error_of_class",
    "parse_alter_result",
    "tls_refused",
    "translated",
]


_ERROR_TEXT = re.compile(r"^\[Error (-?\d+)\] (\w+)(?::\s*(.*))?$", re.DOTALL)


# Kafka's own names (org.apache.kafka.common.protocol.Errors) where kafka-python's differ.
_KAFKA_NAMES = {
    6: "NOT_LEADER_OR_FOLLOWER",
    10: "MESSAGE_TOO_LARGE",
    39: "INVALID_REPLICA_ASSIGNMENT",
}


def api_error(code: int, message: str | None = None) -> ApiError | None:
    """Return the :class:`ApiError` of a Kafka error code, ``None`` for code 0 (NONE).

    ``name`` is Kafka's name for the code (``Errors.java``), e.g. 39 → INVALID_REPLICA_ASSIGNMENT.
    """
    if code == 0:
        return None
    error_class: Any = kafka_errors.for_code(code)
    return ApiError(
        code=code,
        name=_KAFKA_NAMES.get(code) or str(getattr(error_class, "message", "UNKNOWN_SERVER_ERROR")),
        message=message or str(getattr(error_class, "description", "")),
        retriable=bool(getattr(error_class, "retriable", False)),
    )


def error_of_class(error_class: Any) -> ApiError | None:
    """Return the :class:`ApiError` of a kafka-python error class (``None`` for NoError)."""
    return api_error(int(getattr(error_class, "errno", -1)))


def parse_alter_result(text: str) -> ApiError | None:
    """Parse kafka-python's ``"OK"`` / ``"[Error N] Name: message"`` alter_configs result."""
    if text == "OK":
        return None
    match = _ERROR_TEXT.match(text)
    if match is None:
        return ApiError(code=-1, name="UNKNOWN_SERVER_ERROR", message=text)
    return api_error(int(match.group(1)), (match.group(3) or "").strip() or None)


def authorization_error(
    call: str, error: ApiError, resources: tuple[str, ...] = ()
) -> KafkaAuthorizationError:
    """Return the exception for a call refused for lack of an ACL (codes 29, 30, 31).

    Its message names the operation and resource refused (:func:`kpo_kafka.acls.refusal`),
    then Kafka's error, e.g. ``AlterPartitionReassignments needs Alter on
    Cluster:kafka-cluster (CLUSTER_AUTHORIZATION_FAILED, 31)``.
    """
    text = f"{refusal(call, error.code, resources)} ({error.name}, {error.code})"
    return KafkaAuthorizationError(text, error, call)


@contextmanager
def translated(call: str) -> Iterator[None]:
    """Turn kafka-python's exceptions into the ``KafkaAdminError`` family.

    A missing ACL becomes :class:`KafkaAuthorizationError`, refused SASL credentials or a
    failed TLS handshake :class:`KafkaAuthenticationError` (neither is worth a quick retry).
    """
    try:
        yield
    except kafka_errors.SaslAuthenticationFailedError as exc:
        raise KafkaAuthenticationError(
            f"{call}: SASL authentication failed (SASL_AUTHENTICATION_FAILED, 58): {exc}",
            api_error(58),
        ) from exc
    except kafka_errors.IncompatibleBrokerVersion as exc:
        raise KafkaUnsupportedError(f"{call}: not supported by the cluster: {exc}") from exc
    except kafka_errors.UnsupportedVersionError as exc:
        raise KafkaUnsupportedError(f"{call}: not supported by the cluster: {exc}") from exc
    except kafka_errors.KafkaError as exc:
        errno = getattr(exc, "errno", None)
        error = api_error(errno, str(exc)) if isinstance(errno, int) else None
        if error is not None and error.code in AUTHORIZATION_ERRORS:
            raise authorization_error(call, error) from exc
        tls = _tls_failure(exc)
        if tls is not None:
            raise KafkaAuthenticationError(f"{call}: TLS handshake failed: {tls}") from exc
        if getattr(exc, "retriable", False):
            raise KafkaUnavailableError(f"{call}: {exc}", error) from exc
        raise KafkaRequestError(f"{call}: {exc}", error) from exc
    except RuntimeError as exc:  # kafka-python: "Failed to find active controller id!"
        if "controller" in str(exc):
            raise KafkaUnavailableError(f"{call}: {exc}") from exc
        raise
    except ssl.SSLError as exc:
        if not tls_refused(exc):
            raise KafkaUnavailableError(f"{call}: {exc}") from exc
        raise KafkaAuthenticationError(f"{call}: TLS handshake failed: {exc}") from exc
    except OSError as exc:
        raise KafkaUnavailableError(f"{call}: {exc}") from exc


def tls_refused(exc: ssl.SSLError) -> bool:
    """Tell a refused TLS handshake (an alert, an untrusted certificate) from a lost connection.

    A connection closed mid-stream (``SSLEOFError``, ``SSLZeroReturnError``,
    ``SSLSyscallError``: e.g. a broker restarting) is not a refusal: retry it.
    """
    lost = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError)
    return not isinstance(exc, lost)


def _tls_failure(exc: BaseException) -> str | None:
    """Return the TLS refusal a kafka-python error wraps (its args or cause), if any."""
    seen: list[BaseException] = [exc]
    while seen:
        current = seen.pop()
        if isinstance(current, ssl.SSLError) and tls_refused(current):
            return str(current)
        seen.extend(a for a in getattr(current, "args", ()) if isinstance(a, BaseException))
        if current.__cause__ is not None:
            seen.append(current.__cause__)
    return None
