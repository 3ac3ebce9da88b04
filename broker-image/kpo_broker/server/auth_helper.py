"""The authorization checks request handlers make (Kafka's ``AuthHelper``).

Wraps the broker's :class:`~kpo_broker.security.authorizer.AclAuthorizer`, or none: with
no ``authorizer.class.name`` every check passes, as in Kafka. A check names the request's
principal and client address from its
:class:`~kpo_broker.server.request_context.RequestContext`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kpo_broker.protocol.api import APIS
from kpo_broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType, supported_operations
from kpo_broker.security.authorizer import AclAuthorizer

if TYPE_CHECKING:
    from kpo_broker.security.acl_store import AclStore
    from kpo_broker.server.request_context import RequestContext

__all__ = ["AuthHelper"]


def _host(ctx: RequestContext) -> str:
    return str(ctx.peer[0]) if ctx.peer else ""


def _api(ctx: RequestContext) -> str:
    spec = APIS.get(ctx.api_key)
    return spec.name if spec is not None else str(ctx.api_key)


class AuthHelper:
    """Authorization for request handlers.

    Args:
        authorizer: the ACL authorizer, or None when ``authorizer.class.name`` is unset.
        store: the ACLs in ZooKeeper (CreateAcls, DeleteAcls), with the authorizer.
    """

    def __init__(self, authorizer: AclAuthorizer | None = None, store: AclStore | None = None):
        self.authorizer = authorizer
        self.store = store

    def authorize(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """Whether the request's principal may do ``operation`` on the literal resource."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize(
            str(ctx.principal),
            _host(ctx),
            operation,
            resource_type,
            name,
            log_if_denied=log_if_denied,
            api=_api(ctx),
        )

    def authorize_cluster(
        self, ctx: RequestContext, operation: AclOperation, *, log_if_denied: bool = True
    ) -> bool:
        """``operation`` on the ``kafka-cluster`` Cluster resource."""
        return self.authorize(
            ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied
        )

    def filter_authorized(
        self,
        ctx: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_if_denied: bool = True,
    ) -> set[str]:
        """Return the names among ``names`` (each checked once) the principal may ``operation``."""
        return {
            name
            for name in dict.fromkeys(names)
            if self.authorize(ctx, operation, resource_type, name, log_if_denied=log_if_denied)
        }

    def authorized_operations(
        self, ctx: RequestContext, resource_type: ResourceType, name: str
    ) -> set[int]:
        """KIP-430: the codes of the operations allowed on a resource (all without authorizer).

        kafka-python encodes the set as the wire's bit field (bit ``code`` set).
        """
        operations = supported_operations(resource_type)
        if self.authorizer is None:
            return {int(op) for op in operations}
        bits = self.authorizer.authorized_operations(
            str(ctx.principal), _host(ctx), resource_type, name
        )
        return {int(op) for op in operations if bits & (1 << int(op))}

    def authorize_by_resource_type(
        self, ctx: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type allows ``operation`` (``authorizeByResourceType``)."""
        if self.authorizer is None:
            return True
        return self.authorizer.authorize_by_resource_type(
            str(ctx.principal), _host(ctx), operation, resource_type
        )
