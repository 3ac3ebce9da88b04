"""ACLs in ZooKeeper: loading, versioned updates, change notifications (``AclAuthorizer`` I/O).

The znode formats are in :mod:`kpo_broker.security.acl`; decisions and the cache in
:mod:`kpo_broker.security.authorizer`. As Kafka's ``AclAuthorizer``:

- start-up creates the ACL roots (``createAclPaths``), loads every pattern's ACLs
  (``loadAllAcls``) and applies the pending change notifications;
- a change rewrites a pattern's znode with a compare-and-set on its version, retrying
  up to 10 times after a conflict with 100-150 ms of back-off (``updateResourceAcls``);
  a pattern whose last ACL goes has its znode deleted (conditionally too); then one
  change notification is created (``createAclChangeNotification``);
- each broker follows both notification roots in sequence order, re-reading the
  pattern each notification names (``processAclChangeNotification``), and purges
  notifications older than 15 minutes (``ZkNodeChangeNotificationListener``).

Every method blocks on ZooKeeper: call it from a worker thread. One lock serializes
writes and notification processing, as Kafka's authorizer lock does.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kpo_broker.security.acl import (
    ACL_CHANGE_PREFIX,
    CLUSTER_NAME,
    STORES,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclFormatError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_change_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    from_name,
    resource_path,
    resource_type_path,
)
from kpo_broker.security.authorizer import NO_ACLS, AclAuthorizer, VersionedAcls
from kpo_broker.zk.client import KafkaZkClient

__all__ = ["AclError", "AclStore", "DeleteResult"]

log = logging.getLogger(__name__)

MAX_UPDATE_RETRIES = 10
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
_INVALID_REQUEST = 42
_UNKNOWN_SERVER_ERROR = -1
_CONCRETE_TYPES = [t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)]


@dataclass(frozen=True)
class AclError:
    """An error to answer for one ACL (Kafka's ``ApiError``): code and message."""

    code: int
    message: str


@dataclass
class DeleteResult:
    """What one DeleteAcls filter removed (Kafka's ``AclDeleteResult``).

    Attributes:
        bindings: each binding removed, with its error (None when removed).
    """

    bindings: list[tuple[AclBinding, AclError | None]] = field(default_factory=list)


def validate_binding(binding: AclBinding) -> AclError | None:
    """Check a binding CreateAcls may store (``AclApis.handleCreateAcls``, ``validateAclBinding``).

    Returns:
        INVALID_REQUEST with Kafka's message, or None when valid.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return AclError(
            _INVALID_REQUEST, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )
    if not pattern.name:
        return AclError(_INVALID_REQUEST, "Invalid empty resource name")
    unknown = (
        pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY)
        or pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)
        or entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
        or entry.permission_type in (AclPermissionType.UNKNOWN, AclPermissionType.ANY)
    )
    if unknown:
        return AclError(
            _INVALID_REQUEST, "Failed to create ACL: ACL binding contains unknown elements"
        )
    if "/" in pattern.name:
        return AclError(
            _INVALID_REQUEST,
            f"Failed to create ACL: ACL binding contains invalid resource name: {pattern.name}",
        )
    if not entry.principal or ":" not in entry.principal:
        return AclError(
            _INVALID_REQUEST,
            "Failed to create ACL: expected a string in format principalType:principalName "
            f"but got {entry.principal}",
        )
    if entry.host is None:
        return AclError(_INVALID_REQUEST, "Failed to create ACL: host must not be null")
    return None


class AclStore:
    """Keeps an :class:`AclAuthorizer`'s cache in step with ZooKeeper and writes ACL changes.

    Args:
        zk: the broker's ZooKeeper client.
        authorizer: the cache to fill.
        sleep: back-off between conflicting updates (seconds; tests pass a fake).
    """

    def __init__(
        self,
        zk: KafkaZkClient,
        authorizer: AclAuthorizer,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.zk = zk
        self.authorizer = authorizer
        self._sleep = sleep
        self._lock = threading.RLock()
        self._last_seq: dict[str, int] = {store.change_path: -1 for store in STORES}

    # --- start-up and notifications ------------------------------------------------------

    def start(self, on_change: Callable[[], None] | None = None) -> None:
        """Create the ACL paths, load every ACL and apply pending notifications.

        Args:
            on_change: called (from ZooKeeper's thread, must not block) whenever a
                notification root's children change; it should schedule
                :meth:`process_notifications`. Registered before the load, as Kafka
                starts its listeners first, so no change falls between.
        """
        roots = []
        for store in STORES:
            roots.append(store.acl_path)
            roots.extend(resource_type_path(store.pattern_type, t) for t in _CONCRETE_TYPES)
            roots.append(store.change_path)
        self.zk.ensure_acl_paths(roots)
        if on_change is not None:
            for store in STORES:
                self.zk.watch_children(store.change_path, lambda _event: on_change())
        with self._lock:
            count = self._load_all()
        self.process_notifications()
        log.info("ACL authorizer: %d resource patterns with ACLs loaded", count)

    def _load_all(self) -> int:
        count = 0
        for store in STORES:
            for type_name in sorted(self.zk.get_children(store.acl_path)):
                resource_type = from_name(ResourceType, type_name)
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    log.warning("Ignoring unknown ResourceType: %s", type_name)
                    continue
                parent = resource_type_path(store.pattern_type, resource_type)
                for name in sorted(self.zk.get_children(parent)):
                    pattern = ResourcePattern(resource_type, name, store.pattern_type)
                    acls = self._read(pattern)
                    self.authorizer.update_cache(pattern, acls)
                    count += bool(acls.acls)
        return count

    def _read(self, pattern: ResourcePattern) -> VersionedAcls:
        found = self.zk.get_versioned_data(resource_path(pattern))
        if found is None:
            return NO_ACLS
        data, version = found
        try:
            return VersionedAcls(decode_acls(data), version)
        except AclFormatError as exc:
            log.warning("ignoring the ACLs of %s: %s", pattern, exc)
            return VersionedAcls(frozenset(), version)

    def process_notifications(self) -> None:
        """Apply the change notifications not seen yet and purge expired ones."""
        with self._lock:
            now_ms = time.time() * 1000
            for store in STORES:
                parent = store.change_path
                expired = []
                for seq, data, created_ms in self.zk.get_sequential_notifications(
                    parent, ACL_CHANGE_PREFIX
                ):
                    if now_ms - created_ms > CHANGE_EXPIRATION_MS:
                        expired.append(f"{parent}/{ACL_CHANGE_PREFIX}{seq:010d}")
                    if seq <= self._last_seq[parent]:
                        continue
                    try:
                        pattern = decode_acl_change(parent, data)
                    except AclFormatError as exc:
                        log.warning("ignoring ACL change notification %d: %s", seq, exc)
                        self._last_seq[parent] = seq
                        continue
                    acls = self._read(pattern)  # a failure here leaves seq for the next pass
                    self._last_seq[parent] = seq
                    log.info(
                        "Processing Acl change notification for %s, %d ACLs, zkVersion : %d",
                        pattern,
                        len(acls.acls),
                        acls.zk_version,
                    )
                    self.authorizer.update_cache(pattern, acls)
                if expired:
                    self.zk.delete_znodes(expired)

    # --- writes ---------------------------------------------------------------------------

    def _update_resource_acls(
        self,
        pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> bool:
        """Apply ``change`` to a pattern's ACLs with versioned writes; True when they changed.

        Raises:
            RuntimeError: still conflicting after :data:`MAX_UPDATE_RETRIES` retries.
        """
        path = resource_path(pattern)
        current = self.authorizer.cached(pattern) or self._read(pattern)
        for attempt in range(MAX_UPDATE_RETRIES + 1):
            new = change(current.acls)
            if new:
                if current.exists:
                    version = self.zk.conditional_set_data(
                        path, encode_acls(new), current.zk_version
                    )
                else:
                    version = 0 if self.zk.create_if_not_exists(path, encode_acls(new)) else None
            else:
                version = 0 if self.zk.conditional_delete(path, current.zk_version) else None
            if version is not None:
                updated = VersionedAcls(new, version if new else -1)
                self.authorizer.update_cache(pattern, updated)
                if new != current.acls:
                    self.zk.create_sequential(
                        acl_change_path(pattern.pattern_type),
                        ACL_CHANGE_PREFIX,
                        encode_acl_change(pattern),
                    )
                    log.info("Updated ACLs for %s with new version %d", pattern, version)
                    return True
                return False
            if attempt < MAX_UPDATE_RETRIES:
                self._sleep((100 + random.randrange(50)) / 1000)
                current = self._read(pattern)
        raise RuntimeError(
            f"Failed to update ACLs for {pattern} after trying a maximum of "
            f"{MAX_UPDATE_RETRIES} times"
        )

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[AclError | None]:
        """Store bindings (Kafka's ``createAcls``); one result per binding, in order.

        Invalid bindings get INVALID_REQUEST; a ZooKeeper failure fails every binding of
        that pattern with UNKNOWN_SERVER_ERROR.
        """
        results: list[AclError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            error = validate_binding(binding)
            if error is not None:
                results[index] = error
            else:
                by_pattern.setdefault(binding.pattern, []).append(index)
        with self._lock:
            for pattern, indexes in by_pattern.items():
                entries = frozenset(bindings[i].entry for i in indexes)

                def add(
                    acls: frozenset[AccessControlEntry],
                    entries: frozenset[AccessControlEntry] = entries,
                ) -> frozenset[AccessControlEntry]:
                    return acls | entries

                try:
                    self._update_resource_acls(pattern, add)
                except Exception as exc:
                    log.warning("failed to create ACLs for %s: %s", pattern, exc)
                    for i in indexes:
                        results[i] = AclError(_UNKNOWN_SERVER_ERROR, str(exc))
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[DeleteResult]:
        """Remove every ACL a filter selects (Kafka's ``deleteAcls``); one result per filter.

        Candidate patterns are the cached ones plus, for filters naming exactly one
        pattern, that pattern (read from ZooKeeper, so ACLs written by another broker
        and not yet notified are deleted too). A binding matched by several filters is
        reported under the first.
        """
        deleted: dict[AclBinding, int] = {}
        errors: dict[AclBinding, AclError] = {}
        with self._lock:
            candidates = dict.fromkeys(self.authorizer.patterns())
            for binding_filter in filters:
                if binding_filter.pattern_filter.indefinite_field() is None:
                    candidates.update(dict.fromkeys(binding_filter.pattern_filter.patterns()))
            for pattern in candidates:
                matching = [
                    (index, f)
                    for index, f in enumerate(filters)
                    if f.pattern_filter.matches(pattern)
                ]
                if not matching:
                    continue
                removing: dict[AclBinding, int] = {}

                def change(
                    acls: frozenset[AccessControlEntry],
                    pattern: ResourcePattern = pattern,
                    matching: list[tuple[int, AclBindingFilter]] = matching,
                    removing: dict[AclBinding, int] = removing,
                ) -> frozenset[AccessControlEntry]:
                    removing.clear()
                    keep = set()
                    for entry in acls:
                        hit = next((i for i, f in matching if f.entry_filter.matches(entry)), None)
                        if hit is None:
                            keep.add(entry)
                        else:
                            removing[AclBinding(pattern, entry)] = hit
                    return frozenset(keep)

                try:
                    self._update_resource_acls(pattern, change)
                except Exception as exc:
                    log.warning("failed to delete ACLs of %s: %s", pattern, exc)
                    for binding in removing:
                        errors.setdefault(binding, AclError(_UNKNOWN_SERVER_ERROR, str(exc)))
                for binding, index in removing.items():
                    deleted.setdefault(binding, index)
        results = [DeleteResult() for _ in filters]
        for binding, index in deleted.items():
            results[index].bindings.append((binding, errors.get(binding)))
        return results
