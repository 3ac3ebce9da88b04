"""Dynamic configs: ``/config/<entity type>/<name>`` and ``/config/changes`` notifications.

A config write and its change notification (``config_change_<seq>``) go in one multi,
so a broker that sees the notification always reads the new config (Kafka writes them
one after the other in ``AdminZkClient.changeConfigs``). Brokers follow the
notifications in sequence order (Kafka's ``ZkNodeChangeNotificationListener``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, ZookeeperError

from kpo_broker.zk import paths
from kpo_broker.zk.data import (
    ConfigChange,
    decode_config_change_notification,
    decode_entity_config,
    encode_config_change_notification,
    encode_entity_config,
)
from kpo_broker.zk.errors import ZkOperationError
from kpo_broker.zk.ops import CreateOp, Op, SetDataOp, multi_error
from kpo_broker.zk.session import ZkSession

_WRITE_ATTEMPTS = 3


@dataclass(frozen=True)
class EntityConfig:
    """A config entity's overrides as read from ZooKeeper.

    Attributes:
        config: config name -> value, e.g. ``{"retention.ms": "86400000"}``.
        zk_version: the znode version for a compare-and-set write back; None when the
            entity has no config znode.
    """

    config: Mapping[str, str]
    zk_version: int | None


class ConfigZk(ZkSession):
    """Reads and writes of dynamic configs and their change notifications."""

    def get_entity_configs(self, entity_type: str, names: Iterable[str]) -> dict[str, EntityConfig]:
        """Read the configs of many entities of one type, pipelined.

        Args:
            entity_type: ``"topics"``, ``"brokers"``, ``"clients"`` or ``"users"``.
            names: entity names, e.g. topics, broker ids or ``"<default>"``.

        Returns:
            name -> config; entities without a config znode map to an empty config.

        Raises:
            InvalidZNodeNameError: unknown entity type or unusable name.
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a config znode is not Kafka's format.
        """
        ordered = sorted(set(names))
        znodes = [paths.config_entity_path(entity_type, n) for n in ordered]
        requests = [self._request("get_async", p) for p in znodes]
        configs: dict[str, EntityConfig] = {}
        for name, path, result in zip(ordered, znodes, self._run(requests), strict=True):
            if isinstance(result, NoNodeError):
                configs[name] = EntityConfig({}, None)
            elif isinstance(result, ZookeeperError):
                raise ZkOperationError(path, type(result).__name__)
            else:
                configs[name] = EntityConfig(decode_entity_config(result[0]), result[1].version)
        return configs

    def get_entity_config(self, entity_type: str, name: str) -> EntityConfig:
        """Read one entity's config (see :meth:`get_entity_configs`).

        Raises:
            InvalidZNodeNameError: unknown entity type or unusable name.
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: the config znode is not Kafka's format.
        """
        return self.get_entity_configs(entity_type, [name])[name]

    def set_entity_config(
        self,
        entity_type: str,
        name: str,
        config: Mapping[str, str],
        expected_version: int | None = None,
    ) -> int | None:
        """Replace an entity's config and announce it with a ``/config/changes`` notification.

        Args:
            entity_type: ``"topics"``, ``"brokers"``, ``"clients"`` or ``"users"``.
            name: the entity, e.g. a topic, a broker id or ``"<default>"``.
            config: the complete new config (names -> string values).
            expected_version: :attr:`EntityConfig.zk_version` of the config read, for a
                compare-and-set (a read-modify-write such as IncrementalAlterConfigs);
                None overwrites, creating the znode when missing.

        Returns:
            the config znode's new version, or None on a version conflict.

        Raises:
            InvalidZNodeNameError: unknown entity type or unusable name.
            ZkConnectionLossError: the session failed.
        """
        path = paths.config_entity_path(entity_type, name)
        data = encode_entity_config(config)
        notification = CreateOp(
            f"{paths.CONFIG_CHANGES}/{paths.CONFIG_CHANGE_PREFIX}",
            encode_config_change_notification(ConfigChange(entity_type, name)),
            sequence=True,
        )
        version = -1 if expected_version is None else expected_version
        for _ in range(_WRITE_ATTEMPTS):
            set_first: list[Op] = [SetDataOp(path, data, version), notification]
            results = self._multi(set_first)
            error = multi_error(results)
            if error is None:
                return int(results[0].version)
            if expected_version is not None and isinstance(
                results[0], BadVersionError | NoNodeError
            ):
                return None
            if not isinstance(results[0], NoNodeError):
                raise ZkOperationError(path, type(error).__name__)
            results = self._multi([CreateOp(path, data), notification])
            error = multi_error(results)
            if error is None:
                return 0
            if not isinstance(results[0], NodeExistsError):
                raise ZkOperationError(path, type(error).__name__)
        raise ZkOperationError(path, "config znode kept appearing and vanishing")

    def get_config_changes(self, since_seq: int = -1) -> list[tuple[int, ConfigChange]]:
        """Return the config change notifications with a sequence number above ``since_seq``.

        Args:
            since_seq: the last sequence number processed; -1 returns all.

        Returns:
            ``(sequence number, change)`` pairs, oldest first; notifications purged
            meanwhile are skipped.

        Raises:
            ZkConnectionLossError: the session failed.
            MalformedZNodeDataError: a notification is not Kafka's format.
        """
        parent, prefix = paths.CONFIG_CHANGES, paths.CONFIG_CHANGE_PREFIX
        listed = self._call("get_children_async", parent)
        if isinstance(listed, NoNodeError):
            return []
        if isinstance(listed, ZookeeperError):
            raise ZkOperationError(parent, type(listed).__name__)
        seqs = sorted(
            (seq, name)
            for name in listed
            if name.startswith(prefix) and (seq := paths.sequence_number(name, prefix)) > since_seq
        )
        znodes = [paths.config_change_path(name) for _, name in seqs]
        requests = [self._request("get_async", p) for p in znodes]
        changes: list[tuple[int, ConfigChange]] = []
        for (seq, _), path, result in zip(seqs, znodes, self._run(requests), strict=True):
            if isinstance(result, NoNodeError):
                continue
            if isinstance(result, ZookeeperError):
                raise ZkOperationError(path, type(result).__name__)
            changes.append((seq, decode_config_change_notification(result[0])))
        return changes

    def delete_config_changes(self, up_to_seq: int) -> None:
        """Purge the config change notifications with a sequence number up to ``up_to_seq``.

        Kafka purges notifications older than 15 minutes; the caller picks ``up_to_seq``.

        Raises:
            ZkConnectionLossError: the session failed.
        """
        parent, prefix = paths.CONFIG_CHANGES, paths.CONFIG_CHANGE_PREFIX
        listed = self._call("get_children_async", parent)
        if isinstance(listed, NoNodeError):
            return
        if isinstance(listed, ZookeeperError):
            raise ZkOperationError(parent, type(listed).__name__)
        old = [
            paths.config_change_path(name)
            for name in listed
            if name.startswith(prefix) and paths.sequence_number(name, prefix) <= up_to_seq
        ]
        self._delete_recursive(old, None)
