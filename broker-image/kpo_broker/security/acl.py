"""Kafka's ACL vocabulary and its ZooKeeper formats (pure).

The enums carry Kafka's wire codes (``ResourceType``, ``AclOperation``, ``PatternType``,
``AclPermissionType`` in ``org.apache.kafka.common``) and their names as Kafka prints
and stores them (``SecurityUtils``: Pascal case, ``Topic``, ``IdempotentWrite``).

Bindings and filters follow ``AclBinding``, ``ResourcePatternFilter`` and
``AccessControlEntryFilter``: a null name, principal or host matches anything; ``ANY``
matches any value; a ``MATCH`` pattern filter matches the literal resource of that name,
the literal wildcard ``*`` and every prefixed pattern the name starts with.

ZooKeeper (Kafka's ``ZkData.scala``, ``ZkAclStore``/``ZkAclChangeStore``):

- literal patterns in ``/kafka-acl/<ResourceType>/<name>``, prefixed ones in
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``; each znode holds
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}``;
- a change to a literal pattern is announced by a sequential
  ``/kafka-acl-changes/acl_changes_<seq>`` znode holding ``<RESOURCE_TYPE>:<name>``
  (Kafka writes the enum's name, e.g. ``TOPIC:orders``, and reads it case-insensitively);
  a change to any other pattern by ``/kafka-acl-extended-changes/acl_changes_<seq>``
  holding ``{"version":1,"resourceType":"TOPIC","name":"orders","patternType":"PREFIXED"}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

__all__ = [
    "ACL_CHANGE_PREFIX",
    "CLUSTER_NAME",
    "EXTENDED_ACL_CHANGES_PATH",
    "LITERAL_ACL_CHANGES_PATH",
    "STORES",
    "WILDCARD",
    "WILDCARD_PRINCIPAL",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclFormatError",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "acl_change_path",
    "decode_acl_change",
    "decode_acls",
    "encode_acl_change",
    "encode_acls",
    "from_name",
    "kafka_name",
    "resource_path",
    "supported_operations",
]

CLUSTER_NAME = "kafka-cluster"
"""The name of Kafka's single Cluster resource (``Resource.CLUSTER_NAME``)."""
WILDCARD = "*"
"""The wildcard resource name and host (``ResourcePattern.WILDCARD_RESOURCE``)."""
WILDCARD_PRINCIPAL = "User:*"
"""The principal matching every user (``AclEntry.WILDCARD_PRINCIPAL_STRING``)."""
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


class AclFormatError(ValueError):
    """A znode or notification that is not in Kafka's ACL format."""


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` (wire codes)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` (wire codes)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(IntEnum):
    """Kafka's ``PatternType`` (wire codes)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    """Kafka's ``AclPermissionType`` (wire codes)."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_E = TypeVar("_E", ResourceType, AclOperation, PatternType, AclPermissionType)


def kafka_name(value: IntEnum) -> str:
    """Return Kafka's Pascal-case name of an enum value (``SecurityUtils``): ``IdempotentWrite``."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def from_name(enum: type[_E], name: str) -> _E:
    """Parse a name as Kafka does (Pascal case or upper case); UNKNOWN when not a member."""
    wanted = name.strip()
    for member in enum:
        if wanted in (kafka_name(member), member.name):
            return member
    upper = wanted.upper()
    for member in enum:
        if upper in (kafka_name(member).upper(), member.name):
            return member
    return enum(0)


def code_of(enum: type[_E], code: int) -> _E:
    """Kafka's ``fromCode``: a code outside the enum is UNKNOWN."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


_SUPPORTED: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def supported_operations(resource_type: ResourceType) -> tuple[AclOperation, ...]:
    """Return the operations that apply to a resource type (``AclEntry.supportedOperations``).

    Raises:
        ValueError: ``ANY`` or ``UNKNOWN``.
    """
    try:
        return _SUPPORTED[resource_type]
    except KeyError:
        raise ValueError("Not a concrete resource type") from None


@dataclass(frozen=True, order=True)
class ResourcePattern:
    """A resource pattern an ACL applies to (Kafka's ``ResourcePattern``).

    Attributes:
        resource_type: a concrete type (not ANY/UNKNOWN).
        name: the resource name, ``*`` for every resource of the type (literal only).
        pattern_type: LITERAL or PREFIXED.
    """

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        """``ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)``, as Kafka."""
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    """Who may (or may not) do what from where (Kafka's ``AccessControlEntry``).

    Attributes:
        principal: ``<type>:<name>``, e.g. ``User:alice``; ``User:*`` for everyone.
        host: the client's IP address, or ``*``.
        operation: a concrete operation (ALL allowed, not ANY/UNKNOWN).
        permission_type: ALLOW or DENY.
    """

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True)
class AclBinding:
    """An entry bound to a resource pattern (Kafka's ``AclBinding``)."""

    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class ResourcePatternFilter:
    """Selects resource patterns (Kafka's ``ResourcePatternFilter``).

    Attributes:
        resource_type: a type or ANY.
        name: a name, or None for any name.
        pattern_type: LITERAL, PREFIXED, ANY (either, same name) or MATCH (every pattern
            that applies to the named resource).
    """

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        """Whether ``pattern`` is selected (``ResourcePatternFilter.matches``)."""
        if (
            self.resource_type is not ResourceType.ANY
            and self.resource_type != pattern.resource_type
        ):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def indefinite_field(self) -> str | None:
        """Why this filter may match several patterns, or None (``findIndefiniteField``)."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def patterns(self) -> list[ResourcePattern]:
        """Return the patterns of a filter naming one resource (Kafka's ``filterToResources``).

        Raises:
            ValueError: the filter is indefinite.
        """
        if self.indefinite_field() is not None or self.name is None:
            raise ValueError(f"Cannot determine matching resources for {self}")
        if self.pattern_type is PatternType.ANY:
            return [
                ResourcePattern(self.resource_type, self.name, PatternType.LITERAL),
                ResourcePattern(self.resource_type, self.name, PatternType.PREFIXED),
            ]
        return [ResourcePattern(self.resource_type, self.name, self.pattern_type)]


@dataclass(frozen=True)
class AccessControlEntryFilter:
    """Selects entries (Kafka's ``AccessControlEntryFilter``); None and ANY match anything."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        """Whether ``entry`` is selected."""
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation != entry.operation:
            return False
        return (
            self.permission_type is AclPermissionType.ANY
            or self.permission_type == entry.permission_type
        )


@dataclass(frozen=True)
class AclBindingFilter:
    """A pattern filter and an entry filter (Kafka's ``AclBindingFilter``)."""

    pattern_filter: ResourcePatternFilter
    entry_filter: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        """Whether ``binding`` is selected by both filters."""
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(
            binding.entry
        )


# --- ZooKeeper formats ----------------------------------------------------------------


@dataclass(frozen=True)
class _Store:
    pattern_type: PatternType
    acl_path: str
    change_path: str


STORES: tuple[_Store, ...] = (
    _Store(PatternType.LITERAL, "/kafka-acl", LITERAL_ACL_CHANGES_PATH),
    _Store(PatternType.PREFIXED, "/kafka-acl-extended/prefixed", EXTENDED_ACL_CHANGES_PATH),
)
"""Where each pattern type's ACLs and change notifications live (``ZkAclStore.stores``)."""
_STORE_OF = {store.pattern_type: store for store in STORES}


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """``/kafka-acl/Topic`` or ``/kafka-acl-extended/prefixed/Topic``."""
    return f"{_STORE_OF[pattern_type].acl_path}/{kafka_name(resource_type)}"


def resource_path(pattern: ResourcePattern) -> str:
    """Return the znode holding a pattern's ACLs (``ResourceZNode.path``).

    Raises:
        ValueError: a pattern type other than LITERAL/PREFIXED, or a name with ``/``.
    """
    if pattern.pattern_type not in _STORE_OF:
        raise ValueError(f"Invalid pattern type: {pattern.pattern_type.name}")
    if "/" in pattern.name or not pattern.name:
        raise ValueError(f"invalid resource name: {pattern.name!r}")
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def encode_acls(entries: frozenset[AccessControlEntry] | set[AccessControlEntry]) -> bytes:
    """Encode a resource znode's JSON (``ResourceZNode.encode``), entries in a stable order."""
    acls = [
        {
            "principal": e.principal,
            "permissionType": kafka_name(e.permission_type),
            "operation": kafka_name(e.operation),
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(data: bytes | None) -> frozenset[AccessControlEntry]:
    """Parse a resource znode (``AclEntry.fromBytes``); empty data has no ACLs.

    Raises:
        AclFormatError: not version 1 JSON with well-formed entries.
    """
    if not data:
        return frozenset()
    try:
        document = json.loads(data)
        if document.get("version") != 1:
            raise AclFormatError(f"unsupported ACL znode version {document.get('version')!r}")
        out = set()
        for item in document["acls"]:
            principal = str(item["principal"])
            if ":" not in principal:
                raise AclFormatError(f"invalid principal {principal!r}")
            out.add(
                AccessControlEntry(
                    principal,
                    str(item["host"]),
                    from_name(AclOperation, str(item["operation"])),
                    from_name(AclPermissionType, str(item["permissionType"])),
                )
            )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if isinstance(exc, AclFormatError):
            raise
        raise AclFormatError(f"malformed ACL znode: {exc}") from None
    return frozenset(out)


def acl_change_path(pattern_type: PatternType) -> str:
    """Return the notification parent of a pattern type's changes."""
    return _STORE_OF[pattern_type].change_path


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """Encode a change notification (``LiteralAclChangeStore``/``ExtendedAclChangeStore``)."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps(
        {
            "version": 1,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        },
        separators=(",", ":"),
    ).encode()


def decode_acl_change(change_path: str, data: bytes) -> ResourcePattern:
    """Parse a change notification found under ``change_path``.

    Raises:
        AclFormatError: not Kafka's format, or an unknown resource or pattern type.
    """
    try:
        if change_path == LITERAL_ACL_CHANGES_PATH:
            text = data.decode()
            if ":" not in text:
                raise AclFormatError(
                    f"expected a string in format ResourceType:ResourceName but got {text}"
                )
            kind, name = text.split(":", 1)
            pattern = ResourcePattern(from_name(ResourceType, kind), name, PatternType.LITERAL)
        else:
            event = json.loads(data)
            if event.get("version", 0) > 1:
                raise AclFormatError(f"unsupported ACL change event version {event['version']}")
            pattern = ResourcePattern(
                from_name(ResourceType, str(event["resourceType"])),
                str(event["name"]),
                from_name(PatternType, str(event["patternType"])),
            )
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        if isinstance(exc, AclFormatError):
            raise
        raise AclFormatError(f"malformed ACL change notification: {exc}") from None
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY) or (
        pattern.pattern_type not in _STORE_OF
    ):
        raise AclFormatError(f"ACL change notification for an unusable pattern: {pattern}")
    return pattern
