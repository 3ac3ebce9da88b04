"""``meta.properties`` in every log directory: which broker and which cluster the data is for.

Kafka's ``BrokerMetadataCheckpoint`` (ZooKeeper mode, ``version=0``) writes::

    version=0
    broker.id=1
    cluster.id=KtbZzv5XQFmm-hYs7jxW6g

into each directory of ``log.dirs`` and checks it at start-up, before the logs are
loaded: all directories must name one broker id, that id must equal the configured
``broker.id``, and the cluster id must equal the one in ZooKeeper's ``/cluster/id``.
A mismatch stops the broker, so a volume attached to the wrong broker (on Kubernetes:
a PersistentVolumeClaim bound to another pod ordinal) or a ``zookeeper.connect`` that
points at another cluster never serves or overwrites another broker's data.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

META_PROPERTIES = "meta.properties"
_VERSION = 0


class InconsistentBrokerMetadataError(Exception):
    """``meta.properties`` is unreadable, or the log directories disagree with each other.

    Kafka: ``InconsistentBrokerMetadataException``.
    """


class InconsistentBrokerIdError(InconsistentBrokerMetadataError):
    """The configured ``broker.id`` is not the one stored with the data.

    Kafka: ``InconsistentBrokerIdException``.
    """


class InconsistentClusterIdError(InconsistentBrokerMetadataError):
    """ZooKeeper's ``/cluster/id`` is not the cluster id stored with the data.

    Kafka: ``InconsistentClusterIdException``.
    """


@dataclass(frozen=True)
class BrokerMetadata:
    """The content of ``meta.properties``.

    Attributes:
        broker_id: ``broker.id`` (>= 0).
        cluster_id: ``cluster.id``; ``None`` in files written before Kafka 0.10.1.
    """

    broker_id: int
    cluster_id: str | None = None

    def to_text(self) -> str:
        """Return the file's text (``version=0``, Java properties syntax)."""
        lines = ["#Written by the broker; do not edit.", f"version={_VERSION}"]
        lines.append(f"broker.id={self.broker_id}")
        if self.cluster_id is not None:
            lines.append(f"cluster.id={self.cluster_id}")
        return "\n".join(lines) + "\n"


def _parse(text: str, path: Path) -> BrokerMetadata:
    values: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise InconsistentBrokerMetadataError(f"{path}: not a key=value line: {raw!r}")
        values[key.strip()] = value.strip()
    if values.get("version") != str(_VERSION):
        raise InconsistentBrokerMetadataError(
            f"{path}: unsupported version {values.get('version')!r} (expected {_VERSION})"
        )
    try:
        broker_id = int(values["broker.id"])
    except (KeyError, ValueError) as exc:
        raise InconsistentBrokerMetadataError(f"{path}: no valid broker.id") from exc
    return BrokerMetadata(broker_id, values.get("cluster.id") or None)


def read_broker_metadata(log_dir: Path) -> BrokerMetadata | None:
    """Read ``<log_dir>/meta.properties``; ``None`` when the directory has none yet.

    Raises:
        InconsistentBrokerMetadataError: the file exists but cannot be read or parsed.
    """
    path = log_dir / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InconsistentBrokerMetadataError(f"{path}: {exc}") from exc
    return _parse(text, path)


def write_broker_metadata(log_dir: Path, metadata: BrokerMetadata) -> None:
    """Write ``meta.properties`` atomically (temporary file, fsync, rename)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / META_PROPERTIES
    temporary = log_dir / (META_PROPERTIES + ".tmp")
    with temporary.open("w", encoding="utf-8") as out:
        out.write(metadata.to_text())
        out.flush()
        os.fsync(out.fileno())
    temporary.replace(path)


def checkpoint_broker_metadata(
    log_dirs: Sequence[Path], broker_id: int, cluster_id: str
) -> BrokerMetadata:
    """Check every log directory's ``meta.properties`` against this broker, then write it.

    Args:
        log_dirs: the directories of ``log.dirs``.
        broker_id: the configured ``broker.id``.
        cluster_id: ZooKeeper's ``/cluster/id``.

    Returns:
        The metadata now stored in every directory.

    Raises:
        InconsistentBrokerMetadataError: a file is unreadable, or the directories name
            different broker ids or cluster ids.
        InconsistentBrokerIdError: the stored broker id differs from ``broker_id``.
        InconsistentClusterIdError: the stored cluster id differs from ``cluster_id``.
    """
    stored = {d: m for d in log_dirs if (m := read_broker_metadata(d)) is not None}
    ids = {m.broker_id for m in stored.values()}
    clusters = {m.cluster_id for m in stored.values() if m.cluster_id is not None}
    if len(ids) > 1 or len(clusters) > 1:
        found = ", ".join(
            f"{d}: broker.id={m.broker_id} cluster.id={m.cluster_id}" for d, m in stored.items()
        )
        raise InconsistentBrokerMetadataError(
            f"the log directories belong to different brokers or clusters ({found})"
        )
    if ids and broker_id not in ids:
        (stored_id,) = ids
        raise InconsistentBrokerIdError(
            f"configured broker.id {broker_id} does not match the stored broker.id {stored_id} "
            "in meta.properties: if the data was moved, configure that broker.id; for a new "
            "broker, empty the log.dirs"
        )
    if clusters and cluster_id not in clusters:
        (stored_cluster,) = clusters
        raise InconsistentClusterIdError(
            f"the cluster id {cluster_id} in ZooKeeper does not match the stored cluster.id "
            f"{stored_cluster} in meta.properties: the broker is joining another cluster "
            "(check zookeeper.connect and its chroot)"
        )
    metadata = BrokerMetadata(broker_id, cluster_id)
    for log_dir in log_dirs:
        if stored.get(log_dir) != metadata:
            write_broker_metadata(log_dir, metadata)
    return metadata
