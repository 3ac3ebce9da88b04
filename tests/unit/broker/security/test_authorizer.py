"""The ACL authorizer's pure parts: Kafka's matching rules, filters and ZooKeeper formats."""

from __future__ import annotations

import json

import pytest

from kpo_broker.config import BrokerConfig, ConfigError
from kpo_broker.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclFormatError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    resource_path,
)
from kpo_broker.security.acl_store import validate_binding
from kpo_broker.security.authorizer import AclAuthorizer, VersionedAcls, parse_super_users
from kpo_broker.security.config import resolve_authorizer

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
T = ResourceType.TOPIC
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def _authorizer(
    acls: dict[ResourcePattern, list[AccessControlEntry]], **kwargs: object
) -> AclAuthorizer:
    authorizer = AclAuthorizer(**kwargs)  # type: ignore[arg-type]
    for pattern, entries in acls.items():
        authorizer.update_cache(pattern, VersionedAcls(frozenset(entries), 0))
    return authorizer


def _ace(
    op: AclOperation, perm: AclPermissionType = ALLOW, who: str = "User:alice", host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(who, host, op, perm)


def _can(
    authorizer: AclAuthorizer,
    op: AclOperation,
    name: str,
    who: str = "User:alice",
    host: str = "10.0.0.1",
    resource_type: ResourceType = T,
) -> bool:
    return authorizer.authorize(who, host, op, resource_type, name)


def test_no_acl_refuses_unless_everyone_is_allowed() -> None:
    assert not _can(_authorizer({}), Op.READ, "orders")
    assert _can(_authorizer({}, allow_everyone_if_no_acl_found=True), Op.READ, "orders")
    # With ACLs on the resource, allow.everyone no longer applies.
    guarded = _authorizer(
        {ResourcePattern(T, "orders", LIT): [_ace(Op.READ)]}, allow_everyone_if_no_acl_found=True
    )
    assert _can(guarded, Op.READ, "orders")
    assert not _can(guarded, Op.READ, "orders", who="User:bob")
    assert _can(guarded, Op.READ, "other", who="User:bob")


def test_literal_wildcard_and_prefixed_patterns_apply() -> None:
    authorizer = _authorizer(
        {
            ResourcePattern(T, "orders", LIT): [_ace(Op.WRITE)],
            ResourcePattern(T, "*", LIT): [_ace(Op.READ, who="User:bob")],
            ResourcePattern(T, "pay", PRE): [_ace(Op.CREATE, who="User:carol")],
        }
    )
    assert _can(authorizer, Op.WRITE, "orders")
    assert not _can(authorizer, Op.WRITE, "orders2")
    assert _can(authorizer, Op.READ, "anything", who="User:bob")
    assert _can(authorizer, Op.CREATE, "payments", who="User:carol")
    assert _can(authorizer, Op.CREATE, "pay", who="User:carol")
    assert not _can(authorizer, Op.CREATE, "pa", who="User:carol")
    assert not _can(authorizer, Op.CREATE, "xpay", who="User:carol")


def test_deny_beats_allow_and_all_matches_every_operation() -> None:
    authorizer = _authorizer(
        {
            ResourcePattern(T, "*", LIT): [_ace(Op.ALL), _ace(Op.ALL, who="User:*")],
            ResourcePattern(T, "secret", PRE): [_ace(Op.READ, DENY)],
        }
    )
    assert _can(authorizer, Op.DELETE, "orders")
    assert _can(authorizer, Op.READ, "orders", who="User:anyone")
    assert not _can(authorizer, Op.READ, "secret-plans")
    assert _can(authorizer, Op.WRITE, "secret-plans")  # only Read is denied


def test_implied_operations() -> None:
    for granted in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE):
        authorizer = _authorizer({ResourcePattern(T, "t", LIT): [_ace(granted)]})
        assert _can(authorizer, Op.DESCRIBE, "t"), granted
    for granted in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS):
        authorizer = _authorizer({ResourcePattern(T, "t", LIT): [_ace(granted)]})
        assert _can(authorizer, Op.DESCRIBE, "t") is False, granted
    configs = _authorizer({ResourcePattern(T, "t", LIT): [_ace(Op.ALTER_CONFIGS)]})
    assert _can(configs, Op.DESCRIBE_CONFIGS, "t")
    # A deny of Describe is not implied by denying Read.
    mixed = _authorizer({ResourcePattern(T, "t", LIT): [_ace(Op.WRITE), _ace(Op.READ, DENY)]})
    assert _can(mixed, Op.DESCRIBE, "t")


def test_hosts_must_match_the_client_address_or_be_a_wildcard() -> None:
    authorizer = _authorizer(
        {
            ResourcePattern(T, "t", LIT): [
                _ace(Op.READ, host="10.0.0.1"),
                _ace(Op.WRITE, DENY, host="10.0.0.2"),
                _ace(Op.WRITE),
            ]
        }
    )
    assert _can(authorizer, Op.READ, "t", host="10.0.0.1")
    assert not _can(authorizer, Op.READ, "t", host="10.0.0.9")
    assert _can(authorizer, Op.WRITE, "t", host="10.0.0.1")
    assert not _can(authorizer, Op.WRITE, "t", host="10.0.0.2")


def test_super_users_and_the_denial_counter() -> None:
    authorizer = _authorizer(
        {ResourcePattern(T, "t", LIT): [_ace(Op.ALL, DENY, who="User:*")]},
        super_users=parse_super_users(" User:admin ; User:CN=broker-0,O=kpo;"),
    )
    assert _can(authorizer, Op.WRITE, "t", who="User:admin")
    assert _can(
        authorizer, Op.ALTER, "kafka-cluster", "User:CN=broker-0,O=kpo", "h", ResourceType.CLUSTER
    )
    assert not _can(authorizer, Op.WRITE, "t")
    assert not authorizer.authorize(
        "User:alice", "h", Op.READ, T, "t", log_if_denied=False
    )  # a filter check: not counted
    assert authorizer.stats.denied == {("Topic", "Write"): 1}
    with pytest.raises(ValueError, match="principalType:principalName"):
        parse_super_users("admin")


def test_authorize_by_resource_type_as_kafka() -> None:
    def by_type(acls: dict[ResourcePattern, list[AccessControlEntry]], **kwargs: object) -> bool:
        return _authorizer(acls, **kwargs).authorize_by_resource_type(
            "User:alice", "h", Op.WRITE, T
        )

    assert not by_type({})
    assert by_type({}, allow_everyone_if_no_acl_found=True)
    assert by_type({ResourcePattern(T, "orders", LIT): [_ace(Op.WRITE)]})
    assert by_type({ResourcePattern(T, "ord", PRE): [_ace(Op.ALL)]})
    assert not by_type({ResourcePattern(T, "orders", LIT): [_ace(Op.READ)]})  # nothing implied
    # A wildcard deny refuses everything, even with allow.everyone.
    assert not by_type(
        {ResourcePattern(T, "*", LIT): [_ace(Op.WRITE, DENY)]}, allow_everyone_if_no_acl_found=True
    )
    # An allow dominated by a prefixed deny does not count; another one does.
    dominated = {
        ResourcePattern(T, "orders", LIT): [_ace(Op.WRITE)],
        ResourcePattern(T, "ord", PRE): [_ace(Op.WRITE, DENY)],
    }
    assert not by_type(dominated)
    dominated[ResourcePattern(T, "payments", LIT)] = [_ace(Op.WRITE)]
    assert by_type(dominated)
    assert not by_type(
        {
            ResourcePattern(T, "orders", LIT): [_ace(Op.WRITE), _ace(Op.WRITE, DENY)],
        }
    )


def test_authorized_operations_bit_field() -> None:
    authorizer = _authorizer(
        {ResourcePattern(T, "t", LIT): [_ace(Op.READ), _ace(Op.ALTER_CONFIGS)]}
    )
    bits = authorizer.authorized_operations("User:alice", "h", T, "t")
    allowed = {op for op in AclOperation if bits & (1 << op)}
    assert allowed == {Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}


def test_filters_with_any_and_match_pattern_types() -> None:
    literal = ResourcePattern(T, "orders", LIT)
    wildcard = ResourcePattern(T, "*", LIT)
    prefixed = ResourcePattern(T, "ord", PRE)
    same_prefix = ResourcePattern(T, "orders", PRE)
    group = ResourcePattern(ResourceType.GROUP, "orders", LIT)
    everything = [literal, wildcard, prefixed, same_prefix, group]

    def selected(f: ResourcePatternFilter) -> list[ResourcePattern]:
        return [p for p in everything if f.matches(p)]

    assert selected(ResourcePatternFilter(T, "orders", PatternType.ANY)) == [literal, same_prefix]
    assert selected(ResourcePatternFilter(T, "orders", PatternType.MATCH)) == [
        literal,
        wildcard,
        prefixed,
        same_prefix,
    ]
    assert selected(ResourcePatternFilter(T, "orders", PRE)) == [same_prefix]
    assert selected(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY)) == everything
    assert selected(ResourcePatternFilter(ResourceType.ANY, "orders", LIT)) == [literal, group]
    assert ResourcePatternFilter(T, "orders", PatternType.ANY).patterns() == [literal, same_prefix]
    assert ResourcePatternFilter(T, None, LIT).indefinite_field() == "Resource name is NULL."
    entry = _ace(Op.READ)
    assert AccessControlEntryFilter(None, None, Op.ANY, AclPermissionType.ANY).matches(entry)
    assert not AccessControlEntryFilter("User:bob", None, Op.ANY, AclPermissionType.ANY).matches(
        entry
    )
    assert not AccessControlEntryFilter(None, "*", Op.WRITE, AclPermissionType.ANY).matches(entry)
    binding_filter = AclBindingFilter(
        ResourcePatternFilter(T, "orders", PatternType.MATCH),
        AccessControlEntryFilter(None, None, Op.ANY, DENY),
    )
    assert not binding_filter.matches(AclBinding(literal, entry))
    assert binding_filter.matches(AclBinding(prefixed, _ace(Op.READ, DENY)))


def test_znode_formats_are_kafkas() -> None:
    pattern = ResourcePattern(T, "orders", LIT)
    assert resource_path(pattern) == "/kafka-acl/Topic/orders"
    assert resource_path(ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PRE)) == (
        "/kafka-acl-extended/prefixed/TransactionalId/tx"
    )
    data = encode_acls({_ace(Op.IDEMPOTENT_WRITE, DENY, host="10.1.1.1")})
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {
                "principal": "User:alice",
                "permissionType": "Deny",
                "operation": "IdempotentWrite",
                "host": "10.1.1.1",
            }
        ],
    }
    # Kafka's spacing and key order do not matter; upper-case names are accepted too.
    written_by_kafka = (
        b'{"version": 1, "acls": [ { "host":"*", "permissionType": "ALLOW",'
        b'"operation": "DescribeConfigs","principal": "User:bob"}]}'
    )
    assert decode_acls(written_by_kafka) == {
        AccessControlEntry("User:bob", "*", Op.DESCRIBE_CONFIGS, ALLOW)
    }
    with pytest.raises(AclFormatError):
        decode_acls(b'{"version": 2, "acls": []}')
    with pytest.raises(ValueError):
        resource_path(ResourcePattern(T, "a/b", LIT))


def test_change_notifications_are_kafkas() -> None:
    literal = ResourcePattern(T, "orders", LIT)
    prefixed = ResourcePattern(ResourceType.GROUP, "team-", PRE)
    assert encode_acl_change(literal) == b"TOPIC:orders"
    assert json.loads(encode_acl_change(prefixed)) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "team-",
        "patternType": "PREFIXED",
    }
    assert decode_acl_change("/kafka-acl-changes", b"Topic:orders") == literal
    assert decode_acl_change("/kafka-acl-changes", b"TOPIC:a:b").name == "a:b"
    assert decode_acl_change("/kafka-acl-extended-changes", encode_acl_change(prefixed)) == prefixed
    for parent, data in (
        ("/kafka-acl-changes", b"no-separator"),
        ("/kafka-acl-changes", b"Planet:x"),
        ("/kafka-acl-extended-changes", b"not json"),
        ("/kafka-acl-extended-changes", b'{"version":1,"resourceType":"TOPIC","name":"x"}'),
    ):
        with pytest.raises(AclFormatError):
            decode_acl_change(parent, data)


def test_bindings_create_acls_refuses() -> None:
    def error(pattern: ResourcePattern, entry: AccessControlEntry | None = None) -> str | None:
        found = validate_binding(AclBinding(pattern, entry or _ace(Op.READ)))
        return None if found is None else f"{found.code}: {found.message}"

    assert error(ResourcePattern(T, "orders", LIT)) is None
    assert error(ResourcePattern(ResourceType.CLUSTER, "c", LIT)) == (
        "42: The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert error(ResourcePattern(T, "", LIT)) == "42: Invalid empty resource name"
    assert "unknown elements" in str(error(ResourcePattern(T, "x", PatternType.MATCH)))
    assert "unknown elements" in str(error(ResourcePattern(T, "x", LIT), _ace(Op.ANY)))
    assert "invalid resource name: a/b" in str(error(ResourcePattern(T, "a/b", LIT)))
    bad_principal = AccessControlEntry("alice", "*", Op.READ, ALLOW)
    assert "principalType:principalName" in str(error(ResourcePattern(T, "x", LIT), bad_principal))


def test_authorizer_config() -> None:
    def settings(**props: str) -> object:
        return resolve_authorizer(
            BrokerConfig.from_properties(
                {"zookeeper.connect": "localhost:2181", "broker.id": "0", **props}
            )
        )

    assert settings() is None
    resolved = settings(
        **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin;User:ops",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    assert resolved is not None
    assert resolved.super_users == {"User:admin", "User:ops"}  # type: ignore[attr-defined]
    assert resolved.allow_everyone_if_no_acl_found  # type: ignore[attr-defined]
    for props, named in (
        (
            {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
            "authorizer.class.name",
        ),
        (
            {
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "super.users": "admin",
            },
            "super.users",
        ),
        (
            {
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "yes",
            },
            "allow.everyone.if.no.acl.found",
        ),
    ):
        with pytest.raises(ConfigError) as info:
            settings(**props)
        assert info.value.property_name == named
