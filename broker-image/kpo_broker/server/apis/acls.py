"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140, prefixed patterns KIP-290).

As Kafka's ``AclApis``: DescribeAcls needs Describe on the cluster, CreateAcls and
DeleteAcls need Alter on it (CLUSTER_AUTHORIZATION_FAILED otherwise); a broker without
an authorizer answers SECURITY_DISABLED (54). ACLs are read from this broker's cache
(which follows ZooKeeper's change notifications) and written to ZooKeeper through
:class:`~kpo_broker.security.acl_store.AclStore`, so every broker, ours or Apache
Kafka's, sees them.

Requests Kafka's request classes refuse while parsing (an UNKNOWN resource type,
operation, permission or pattern type; a non-literal pattern in v0) are answered with
INVALID_REQUEST (42) for the whole request here rather than closing the connection.
Versions 1-3 are served (kafka-python's codecs have no v0, which Kafka 3.9 deprecates).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kafka.protocol.admin import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from kpo_broker.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    code_of,
)
from kpo_broker.security.authorizer import group_bindings
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.request_context import RequestContext

_SECURITY_DISABLED = 54
_CLUSTER_AUTHORIZATION_FAILED = 31
_INVALID_REQUEST = 42
_CLUSTER_REFUSED = "Cluster authorization failed."
_Creation = CreateAclsResponse.AclCreationResult
_Resource = DescribeAclsResponse.DescribeAclsResource
_Description = _Resource.AclDescription
_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _FilterResult.DeleteAclsMatchingAcl


def _filter(item: Any) -> AclBindingFilter | None:
    """Read a wire filter (DescribeAcls, DeleteAcls entry); None when it has UNKNOWN parts."""
    resource_type = code_of(ResourceType, item.resource_type_filter)
    pattern_type = code_of(PatternType, item.pattern_type_filter)
    operation = code_of(AclOperation, item.operation)
    permission = code_of(AclPermissionType, item.permission_type)
    if (
        resource_type is ResourceType.UNKNOWN
        or pattern_type is PatternType.UNKNOWN
        or operation is AclOperation.UNKNOWN
        or permission is AclPermissionType.UNKNOWN
    ):
        return None
    return AclBindingFilter(
        ResourcePatternFilter(resource_type, item.resource_name_filter, pattern_type),
        AccessControlEntryFilter(item.principal_filter, item.host_filter, operation, permission),
    )


async def handle_describe_acls(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DescribeAclsResponse:
    """List the ACLs the filter selects, one entry per resource pattern."""

    def error(code: int, message: str) -> DescribeAclsResponse:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=code, error_message=message, resources=[]
        )

    if not broker.auth.authorize_cluster(ctx, AclOperation.DESCRIBE):
        return error(_CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
    authorizer = broker.auth.authorizer
    if authorizer is None:
        return error(_SECURITY_DISABLED, "No Authorizer is configured on the broker")
    binding_filter = _filter(request)
    if binding_filter is None:
        return error(_INVALID_REQUEST, "DescribeAclsRequest contains UNKNOWN elements")
    resources = [
        _Resource(
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            acls=[
                _Description(
                    principal=b.entry.principal,
                    host=b.entry.host,
                    operation=int(b.entry.operation),
                    permission_type=int(b.entry.permission_type),
                )
                for b in bindings
            ],
        )
        for pattern, bindings in group_bindings(authorizer.acls(binding_filter)).items()
    ]
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, resources=resources
    )


async def handle_create_acls(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> CreateAclsResponse:
    """Store each ACL; one result per creation, in order."""
    creations = list(request.creations)

    def every(code: int, message: str | None) -> CreateAclsResponse:
        return CreateAclsResponse(
            throttle_time_ms=0,
            results=[_Creation(error_code=code, error_message=message) for _ in creations],
        )

    if not broker.auth.authorize_cluster(ctx, AclOperation.ALTER):
        return every(_CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
    store = broker.auth.store
    if store is None:
        return every(_SECURITY_DISABLED, "No Authorizer is configured.")
    bindings = [
        AclBinding(
            ResourcePattern(
                code_of(ResourceType, c.resource_type),
                c.resource_name,
                code_of(PatternType, c.resource_pattern_type),
            ),
            AccessControlEntry(
                c.principal,
                c.host,
                code_of(AclOperation, c.operation),
                code_of(AclPermissionType, c.permission_type),
            ),
        )
        for c in creations
    ]
    unknown = any(
        b.pattern.resource_type is ResourceType.UNKNOWN
        or b.pattern.pattern_type is PatternType.UNKNOWN
        or b.entry.operation is AclOperation.UNKNOWN
        or b.entry.permission_type is AclPermissionType.UNKNOWN
        for b in bindings
    )
    if unknown:
        return every(_INVALID_REQUEST, "CreatableAcls contain unknown elements")
    results = await asyncio.to_thread(store.create_acls, bindings)
    return CreateAclsResponse(
        throttle_time_ms=0,
        results=[
            _Creation(error_code=0, error_message=None)
            if r is None
            else _Creation(error_code=r.code, error_message=r.message)
            for r in results
        ],
    )


async def handle_delete_acls(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DeleteAclsResponse:
    """Remove the ACLs each filter selects; each filter answers what it removed."""
    items = list(request.filters)

    def every(code: int, message: str) -> DeleteAclsResponse:
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                _FilterResult(error_code=code, error_message=message, matching_acls=[])
                for _ in items
            ],
        )

    if not broker.auth.authorize_cluster(ctx, AclOperation.ALTER):
        return every(_CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_REFUSED)
    store = broker.auth.store
    if store is None:
        return every(_SECURITY_DISABLED, "No Authorizer is configured.")
    filters = [_filter(item) for item in items]
    if any(f is None for f in filters):
        return every(_INVALID_REQUEST, "Filters contain UNKNOWN elements")
    results = await asyncio.to_thread(store.delete_acls, [f for f in filters if f is not None])
    return DeleteAclsResponse(
        throttle_time_ms=0,
        filter_results=[
            _FilterResult(
                error_code=0,
                error_message=None,
                matching_acls=[
                    _Matching(
                        error_code=error.code if error else 0,
                        error_message=error.message if error else None,
                        resource_type=int(b.pattern.resource_type),
                        resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type),
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission_type),
                    )
                    for b, error in result.bindings
                ],
            )
            for result in results
        ],
    )
