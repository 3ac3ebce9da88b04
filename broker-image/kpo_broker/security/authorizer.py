"""ACL decisions from a cache of every ACL (Kafka's ``AclAuthorizer``, pure).

The cache maps each resource pattern to its entries and its znode version (Kafka's
``VersionedAcls``); :mod:`kpo_broker.security.acl_store` fills it from ZooKeeper and keeps
it current from the change notifications.

:meth:`AclAuthorizer.authorize` decides as Kafka's ``AclAuthorizer.authorizeAction``:

- a principal listed in ``super.users`` may do everything;
- the ACLs that apply to a resource are those of the literal pattern of its name, of the
  literal wildcard ``*`` of its type, and of every prefixed pattern its name starts with;
- with none at all, ``allow.everyone.if.no.acl.found`` decides (default false);
- otherwise a matching DENY refuses (deny beats allow), else a matching ALLOW permits,
  else the operation is refused. An entry matches when its principal is the requester's
  or ``User:*``, its host the client's IP address or ``*``, and its operation the one
  asked or ``All``; an ALLOW of Read, Write, Delete or Alter also allows Describe, and
  an ALLOW of AlterConfigs also allows DescribeConfigs.

:meth:`AclAuthorizer.authorize_by_resource_type` answers "may the principal do this to
some resource of the type" (Kafka's ``authorizeByResourceType``, used by
InitProducerId: idempotent producers need IdempotentWrite on the cluster or Write on
some topic).

Every refusal of an explicitly requested resource is logged at INFO on the
``kafka.authorizer.logger`` logger with the principal, operation, host and resource (no
credentials reach this module) and counted in :attr:`AclAuthorizer.stats`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kpo_broker.security.acl import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    kafka_name,
    supported_operations,
)

__all__ = [
    "AUTHORIZER_CLASS",
    "AclAuthorizer",
    "AuthorizationStats",
    "VersionedAcls",
    "operations_bit_field",
    "parse_super_users",
]

AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
"""The ``authorizer.class.name`` this broker implements."""

audit = logging.getLogger("kafka.authorizer.logger")

_IMPLIED: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


@dataclass(frozen=True)
class VersionedAcls:
    """A pattern's entries and its znode version (-1: no znode)."""

    acls: frozenset[AccessControlEntry]
    zk_version: int

    @property
    def exists(self) -> bool:
        """Whether the znode exists."""
        return self.zk_version >= 0


NO_ACLS = VersionedAcls(frozenset(), -1)


@dataclass
class AuthorizationStats:
    """Authorization outcomes (Kafka's ``authorizer-metrics`` allowed/denied counts).

    Attributes:
        allowed: number of allowed checks.
        denied: (resource type name, operation name) -> number of refusals.
    """

    allowed: int = 0
    denied: dict[tuple[str, str], int] = field(default_factory=dict)

    def record_denied(self, resource_type: ResourceType, operation: AclOperation) -> None:
        """Count one refusal."""
        key = (kafka_name(resource_type), kafka_name(operation))
        self.denied[key] = self.denied.get(key, 0) + 1


def parse_super_users(value: str | None) -> frozenset[str]:
    """Parse ``super.users``: principals separated by ``;`` (e.g. ``User:admin;User:broker``).

    Raises:
        ValueError: an entry is not ``<type>:<name>``.
    """
    out = set()
    for part in (value or "").split(";"):
        principal = part.strip()
        if not principal:
            continue
        if ":" not in principal:
            raise ValueError(
                f"expected a string in format principalType:principalName but got {principal}"
            )
        out.add(principal)
    return frozenset(out)


def operations_bit_field(operations: Iterable[AclOperation]) -> int:
    """Return KIP-430's ``authorized_operations``: bit ``code`` per operation (``to32BitField``)."""
    value = 0
    for operation in operations:
        value |= 1 << int(operation)
    return value


class AclAuthorizer:
    """The ACL cache and Kafka's decision rules.

    Args:
        super_users: principals (``User:admin``) allowed everything (``super.users``).
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found``.

    Thread-safe: the cache is updated from ZooKeeper's threads while requests are
    authorized on the event loop.
    """

    def __init__(
        self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.stats = AuthorizationStats()
        self._lock = threading.Lock()
        self._cache: dict[ResourcePattern, VersionedAcls] = {}
        # (resource type, pattern type) -> name -> entries: the lookups authorize needs.
        self._index: dict[
            tuple[ResourceType, PatternType], dict[str, frozenset[AccessControlEntry]]
        ]
        self._index = {}

    # --- cache -------------------------------------------------------------------------

    def update_cache(self, pattern: ResourcePattern, acls: VersionedAcls) -> None:
        """Replace a pattern's entries (none: the pattern is dropped) (``updateCache``)."""
        with self._lock:
            names = self._index.setdefault((pattern.resource_type, pattern.pattern_type), {})
            if acls.acls:
                self._cache[pattern] = acls
                names[pattern.name] = acls.acls
            else:
                self._cache.pop(pattern, None)
                names.pop(pattern.name, None)

    def cached(self, pattern: ResourcePattern) -> VersionedAcls | None:
        """Return the cached entries of a pattern, or None when the cache has none."""
        with self._lock:
            return self._cache.get(pattern)

    def patterns(self) -> list[ResourcePattern]:
        """Every pattern with ACLs, as cached."""
        with self._lock:
            return list(self._cache)

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every cached binding the filter selects (Kafka's ``Authorizer.acls``)."""
        with self._lock:
            items = list(self._cache.items())
        return [
            binding
            for pattern, versioned in items
            for entry in versioned.acls
            if binding_filter.matches(binding := AclBinding(pattern, entry))
        ]

    # --- decisions ---------------------------------------------------------------------

    def _matching_acls(
        self, resource_type: ResourceType, name: str
    ) -> list[frozenset[AccessControlEntry]]:
        with self._lock:
            literal = self._index.get((resource_type, PatternType.LITERAL), {})
            prefixed = self._index.get((resource_type, PatternType.PREFIXED), {})
            found = [literal.get(WILDCARD, frozenset()), literal.get(name, frozenset())]
            if prefixed:
                found.extend(
                    prefixed[name[:i]] for i in range(1, len(name) + 1) if name[:i] in prefixed
                )
        return [acls for acls in found if acls]

    @staticmethod
    def _exists(
        acl_sets: list[frozenset[AccessControlEntry]],
        operations: frozenset[AclOperation],
        principal: str,
        host: str,
        permission: AclPermissionType,
    ) -> bool:
        return any(
            acl.permission_type == permission
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and (acl.operation in operations or acl.operation is AclOperation.ALL)
            and acl.host in (host, WILDCARD)
            for acls in acl_sets
            for acl in acls
        )

    def is_super_user(self, principal: str) -> bool:
        """Whether ``principal`` is in ``super.users``."""
        return principal in self.super_users

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
        api: str = "",
    ) -> bool:
        """Decide one action on a literal resource (``authorizeAction``).

        Args:
            principal: ``User:alice``.
            host: the client's IP address.
            operation: a concrete operation.
            resource_type: a concrete resource type.
            name: the resource name (``kafka-cluster`` for the cluster).
            log_if_denied: log and count a refusal (False when the check only filters,
                e.g. the topics of an all-topics Metadata request).
            api: the request's API name, for the log line.
        """
        allowed = self.is_super_user(principal)
        if not allowed:
            acl_sets = self._matching_acls(resource_type, name)
            if not acl_sets:
                allowed = self.allow_everyone_if_no_acl_found
            elif not self._exists(
                acl_sets, frozenset({operation}), principal, host, AclPermissionType.DENY
            ):
                implied = _IMPLIED.get(operation, frozenset({operation}))
                allowed = self._exists(acl_sets, implied, principal, host, AclPermissionType.ALLOW)
        self._audit(allowed, principal, host, operation, resource_type, name, log_if_denied, api)
        return allowed

    def _audit(
        self,
        allowed: bool,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_if_denied: bool,
        api: str,
    ) -> None:
        if allowed:
            self.stats.allowed += 1
            return
        if not log_if_denied:
            return
        self.stats.record_denied(resource_type, operation)
        audit.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource = %s:LITERAL:%s"
            " for request = %s",
            principal,
            kafka_name(operation),
            host,
            kafka_name(resource_type),
            name,
            api or "?",
        )

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """Return KIP-430's bit field of the operations allowed on a resource."""
        return operations_bit_field(
            op
            for op in supported_operations(resource_type)
            if self.authorize(principal, host, op, resource_type, name, log_if_denied=False)
        )

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type allows ``operation`` (``authorizeByResourceType``).

        As Kafka: a literal wildcard DENY refuses; ``allow.everyone.if.no.acl.found``
        allows; otherwise some ALLOW pattern (literal or prefixed) must not be dominated
        by a DENY of the same name or of a prefix of it. Only the operation itself or
        ``All`` match (no implied operations).
        """
        if self.is_super_user(principal):
            return True
        ops = frozenset({operation, AclOperation.ALL})

        def names(pattern_type: PatternType, permission: AclPermissionType) -> set[str]:
            with self._lock:
                by_name = dict(self._index.get((resource_type, pattern_type), {}))
            return {
                name
                for name, acls in by_name.items()
                if any(
                    acl.permission_type == permission
                    and acl.principal in (principal, WILDCARD_PRINCIPAL)
                    and acl.operation in ops
                    and acl.host in (host, WILDCARD)
                    for acl in acls
                )
            }

        deny_literals = names(PatternType.LITERAL, AclPermissionType.DENY)
        if WILDCARD in deny_literals:
            return self._by_type_result(False, principal, host, operation, resource_type)
        if self.allow_everyone_if_no_acl_found:
            return True
        deny_prefixes = names(PatternType.PREFIXED, AclPermissionType.DENY)
        allow_literals = names(PatternType.LITERAL, AclPermissionType.ALLOW)
        allow_prefixes = names(PatternType.PREFIXED, AclPermissionType.ALLOW)

        def dominated(name: str) -> bool:
            return any(name[:i] in deny_prefixes for i in range(1, len(name) + 1))

        allowed = any(not dominated(p) for p in allow_prefixes) or any(
            literal == WILDCARD or (literal not in deny_literals and not dominated(literal))
            for literal in allow_literals
        )
        return self._by_type_result(allowed, principal, host, operation, resource_type)

    def _by_type_result(
        self,
        allowed: bool,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        if not allowed:
            audit.debug(
                "Principal = %s is Denied Operation = %s from host = %s on any %s",
                principal,
                kafka_name(operation),
                host,
                kafka_name(resource_type),
            )
        return allowed


def group_bindings(bindings: Iterable[AclBinding]) -> Mapping[ResourcePattern, list[AclBinding]]:
    """Group bindings by pattern, keeping order (DescribeAcls answers one entry per pattern)."""
    out: dict[ResourcePattern, list[AclBinding]] = {}
    for binding in bindings:
        out.setdefault(binding.pattern, []).append(binding)
    return out
