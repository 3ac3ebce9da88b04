"""Log dirs that failed with an I/O error (Kafka's ``LogDirFailureChannel``).

Any ``OSError`` met while reading or writing a log dir (a full disk, ``ENOSPC``; no
descriptor left, ``EMFILE``; a failing device, ``EIO``) takes the whole dir offline, once:
the first error on a dir records it and tells the listeners, later errors on that dir are
only logged. Code touching a log dir wraps the I/O in :meth:`LogDirFailureChannel.guard`,
which turns the ``OSError`` into :class:`KafkaStorageError` (``KAFKA_STORAGE_ERROR``, 56)
so that the request fails with Kafka's error for an offline replica rather than
``UNKNOWN_SERVER_ERROR``.

A dir stays offline until the broker restarts (Kafka's rule). The broker's handler
(``kpo_broker.server.log_dir_failure``) then stops serving the dir's replicas, closes its
logs and tells the controller through ``/log_dir_event_notification``.

Thread-safe: the event loop, the log cleaner and the retention/checkpoint workers all
report failures.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from kpo_broker.log.errors import KAFKA_STORAGE_ERROR, LogError

_log = logging.getLogger(__name__)

#: Called with a dir that just went offline, on the thread that met the error.
OfflineDirListener = Callable[[Path], None]


class KafkaStorageError(LogError):
    """The replica's log dir is offline, or just failed (Kafka's ``KafkaStorageException``).

    Maps to ``KAFKA_STORAGE_ERROR`` (56): clients refresh their metadata and retry on
    the new leader.
    """

    error_code = KAFKA_STORAGE_ERROR


class LogDirFailureChannel:
    """The offline log dirs of one broker, each reported once (Kafka's ``LogDirFailureChannel``).

    Args:
        log_dirs: the broker's ``log.dirs``; a failure is attributed to the one holding
            the path given (see :meth:`log_dir_of`).
    """

    def __init__(self, log_dirs: Iterable[Path]) -> None:
        self._log_dirs = [Path(d) for d in log_dirs]
        self._offline: list[Path] = []
        self._listeners: list[OfflineDirListener] = []
        self._lock = threading.Lock()

    def add_listener(self, listener: OfflineDirListener) -> None:
        """Call ``listener(dir)`` once for each dir that goes offline from now on."""
        with self._lock:
            self._listeners.append(listener)

    @property
    def offline_dirs(self) -> list[Path]:
        """The offline dirs, in the order they failed."""
        with self._lock:
            return list(self._offline)

    def has_offline_log_dir(self, log_dir: Path) -> bool:
        """Whether ``log_dir`` (one of ``log.dirs``) is offline."""
        with self._lock:
            return Path(log_dir) in self._offline

    def log_dir_of(self, path: Path) -> Path:
        """Return the log dir that holds ``path`` (a log dir, partition dir or file in one).

        A path in none of them is returned as given (it is then its own "dir").
        """
        path = Path(path)
        for log_dir in self._log_dirs:
            if path == log_dir or log_dir in path.parents:
                return log_dir
        return path

    def maybe_add_offline_log_dir(self, path: Path, message: str, error: OSError) -> bool:
        """Record that the log dir holding ``path`` failed with ``error``.

        Logs ``message`` with the error each time; only the first failure of a dir marks
        it offline and calls the listeners (Kafka's ``maybeAddOfflineLogDir``).

        Returns:
            True when this call took the dir offline.
        """
        log_dir = self.log_dir_of(path)
        _log.error("%s: %s", message, error)
        with self._lock:
            if log_dir in self._offline:
                return False
            self._offline.append(log_dir)
            listeners = list(self._listeners)
        _log.error("log dir %s is offline after an I/O error (%s)", log_dir, error)
        for listener in listeners:
            try:
                listener(log_dir)
            except Exception:
                _log.exception("log dir failure listener failed for %s", log_dir)
        return True

    def check_online(self, path: Path) -> None:
        """Raise unless the log dir holding ``path`` is online.

        Raises:
            KafkaStorageError: that dir is offline.
        """
        log_dir = self.log_dir_of(path)
        if self.has_offline_log_dir(log_dir):
            raise KafkaStorageError(f"log dir {log_dir} is offline")

    @contextlib.contextmanager
    def guard(self, path: Path, what: str) -> Iterator[None]:
        """Run the block's I/O on the log dir holding ``path``; an ``OSError`` takes it offline.

        Kafka's ``maybeHandleIOException``: the dir is marked offline (once) and the
        error re-raised as :class:`KafkaStorageError`, chained to the ``OSError``.

        Args:
            path: a log dir, or a path inside one (partition dir, checkpoint file).
            what: what was being done, for the log line (e.g. ``"append to t-0"``).

        Raises:
            KafkaStorageError: the block raised an ``OSError``, or the dir was already
                offline when the block failed.
        """
        try:
            yield
        except OSError as exc:
            log_dir = self.log_dir_of(path)
            self.maybe_add_offline_log_dir(log_dir, f"error in log dir {log_dir} ({what})", exc)
            raise KafkaStorageError(f"{what}: log dir {log_dir} is offline: {exc}") from exc
