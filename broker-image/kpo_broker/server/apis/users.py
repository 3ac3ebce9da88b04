"""SASL requests after authentication, and SCRAM user credentials (KIP-554).

SaslHandshake and SaslAuthenticate reach the request handlers only once a connection is
authenticated (or on a listener without SASL): Kafka answers both with
ILLEGAL_SASL_STATE (34).

DescribeUserScramCredentials (API 50) reads ``/config/users``; AlterUserScramCredentials
(API 51) is served by the active controller only (NOT_CONTROLLER elsewhere, as in
Kafka's ZooKeeper mode) and writes each user's credentials to
``/config/users/<sanitized name>`` with a ``/config/changes`` notification, from which
every broker's credential cache follows. Validation and messages are those of Kafka's
``ZkAdminManager``: empty user names, unknown mechanisms, iterations outside
4096..16384, a user altered twice for one mechanism, deletion of a missing credential.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from kafka import errors as kafka_errors
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from kpo_broker.security.acl import AclOperation
from kpo_broker.security.credentials import desanitize, sanitize, scram_credentials_of
from kpo_broker.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    credential_from_salted,
    credential_to_string,
)
from kpo_broker.server.components import BrokerComponents
from kpo_broker.server.errors import error_code_of
from kpo_broker.server.request_context import RequestContext

_ILLEGAL_SASL_STATE = int(kafka_errors.IllegalSaslStateError.errno)
_NOT_CONTROLLER = int(kafka_errors.NotControllerError.errno)
_UNSUPPORTED_SASL_MECHANISM = 33
_RESOURCE_NOT_FOUND = 91
_DUPLICATE_RESOURCE = 92
_UNACCEPTABLE_CREDENTIAL = 93
_CLUSTER_AUTHORIZATION_FAILED = 31
_EMPTY_USER = "Username must not be empty"
_MECHANISM_BY_TYPE = {m.type_id: m for m in MECHANISMS.values()}

_DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_CredentialInfo = _DescribeResult.CredentialInfo
_AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle_sasl_handshake(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> SaslHandshakeResponse:
    """SaslHandshake outside the authentication exchange: ILLEGAL_SASL_STATE (Kafka's KafkaApis)."""
    return SaslHandshakeResponse(error_code=_ILLEGAL_SASL_STATE, mechanisms=[])


async def handle_sasl_authenticate(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> SaslAuthenticateResponse:
    """SaslAuthenticate outside the authentication exchange: ILLEGAL_SASL_STATE."""
    fields: dict[str, Any] = {
        "error_code": _ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
    }
    if ctx.api_version >= 1:
        fields["session_lifetime_ms"] = 0
    return SaslAuthenticateResponse(**fields)


def _describe_one(user: str, config: dict[str, str], explicit: bool) -> Any | None:
    credentials = scram_credentials_of(config)
    if not credentials:
        if not explicit:
            return None
        return _DescribeResult(
            user=user,
            error_code=_RESOURCE_NOT_FOUND,
            error_message=f"Attempt to describe a user credential that does not exist: {user}",
            credential_infos=[],
        )
    infos = [
        _CredentialInfo(mechanism=MECHANISMS[name].type_id, iterations=cred.iterations)
        for name, cred in credentials.items()
    ]
    return _DescribeResult(user=user, error_code=0, error_message=None, credential_infos=infos)


def _describe(
    broker: BrokerComponents, users: list[str] | None
) -> DescribeUserScramCredentialsResponse:
    zk = broker.zk
    results: list[Any] = []
    if not users:
        names = sorted(zk.get_entity_names("users"))
        configs = zk.get_entity_configs("users", names)
        for name in names:
            result = _describe_one(desanitize(name), dict(configs[name].config), explicit=False)
            if result is not None:
                results.append(result)
        results.sort(key=lambda r: r.user)
    else:
        counts = Counter(users)
        for user in dict.fromkeys(users):
            if not user:
                results.append(
                    _DescribeResult(
                        user=user,
                        error_code=_RESOURCE_NOT_FOUND,
                        error_message=_EMPTY_USER,
                        credential_infos=[],
                    )
                )
            elif counts[user] > 1:
                results.append(
                    _DescribeResult(
                        user=user,
                        error_code=_DUPLICATE_RESOURCE,
                        error_message="Cannot describe SCRAM credentials for the same user "
                        f"twice in a single request: {user}",
                        credential_infos=[],
                    )
                )
            else:
                config = dict(zk.get_entity_config("users", sanitize(user)).config)
                results.append(_describe_one(user, config, explicit=True))
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, results=results
    )


async def handle_describe_user_scram_credentials(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> DescribeUserScramCredentialsResponse:
    """List the SCRAM mechanisms and iteration counts of the named users, or of all users."""
    users = None if request.users is None else [u.name for u in request.users]
    if not broker.auth.authorize_cluster(ctx, AclOperation.DESCRIBE):  # Kafka: Describe Cluster
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=_CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            results=[],
        )
    try:
        return await asyncio.to_thread(_describe, broker, users)
    except Exception as exc:
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=error_code_of(exc),
            error_message="Error processing describe user SCRAM credential configs request",
            results=[],
        )


def plan_alterations(
    upsertions: list[Any], deletions: list[Any]
) -> tuple[dict[str, tuple[int, str]], set[str]]:
    """Validate an AlterUserScramCredentials request as Kafka's ``ZkAdminManager`` does.

    Args:
        upsertions: entries with ``name``, ``mechanism``, ``iterations``.
        deletions: entries with ``name``, ``mechanism``.

    Returns:
        (user -> (error code, message) for refused users, users that may be altered).
    """
    errors: dict[str, tuple[int, str]] = {}
    for deletion in deletions:
        if not deletion.name:
            errors[deletion.name] = (_UNACCEPTABLE_CREDENTIAL, _EMPTY_USER)
        elif deletion.mechanism not in _MECHANISM_BY_TYPE:
            errors[deletion.name] = (_UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for upsertion in upsertions:
        mechanism = _MECHANISM_BY_TYPE.get(upsertion.mechanism)
        if not upsertion.name:
            errors[upsertion.name] = (_UNACCEPTABLE_CREDENTIAL, _EMPTY_USER)
        elif mechanism is None:
            errors[upsertion.name] = (_UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif upsertion.iterations > MAX_ITERATIONS:
            errors[upsertion.name] = (_UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif upsertion.iterations < mechanism.min_iterations:
            errors[upsertion.name] = (_UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    pairs = Counter(
        (entry.name, entry.mechanism)
        for entry in (*upsertions, *deletions)
        if entry.name not in errors
    )
    for (user, _), count in pairs.items():
        if count > 1:
            errors[user] = (
                _DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
    valid = {user for user, _ in pairs if user not in errors}
    return errors, valid


def _alter(
    broker: BrokerComponents, upsertions: list[Any], deletions: list[Any]
) -> AlterUserScramCredentialsResponse:
    errors, valid = plan_alterations(upsertions, deletions)
    results = [_AlterResult(user=u, error_code=c, error_message=m) for u, (c, m) in errors.items()]
    zk = broker.zk
    for user in sorted(valid):
        entity = zk.get_entity_config("users", sanitize(user))
        config = dict(entity.config)
        missing = [
            d
            for d in deletions
            if d.name == user and _MECHANISM_BY_TYPE[d.mechanism].name not in config
        ]
        if missing:
            results.append(
                _AlterResult(
                    user=user,
                    error_code=_RESOURCE_NOT_FOUND,
                    error_message="Attempt to delete a user credential that does not exist",
                )
            )
            continue
        try:
            for deletion in (d for d in deletions if d.name == user):
                config.pop(_MECHANISM_BY_TYPE[deletion.mechanism].name, None)
            for upsertion in (u for u in upsertions if u.name == user):
                mechanism = _MECHANISM_BY_TYPE[upsertion.mechanism]
                credential = credential_from_salted(
                    mechanism,
                    bytes(upsertion.salt),
                    bytes(upsertion.salted_password),
                    upsertion.iterations,
                )
                config[mechanism.name] = credential_to_string(credential)
            zk.set_entity_config("users", sanitize(user), config)
        except Exception as exc:
            results.append(
                _AlterResult(user=user, error_code=error_code_of(exc), error_message=None)
            )
            continue
        results.append(_AlterResult(user=user, error_code=0, error_message=None))
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


async def handle_alter_user_scram_credentials(
    broker: BrokerComponents, ctx: RequestContext, request: Any
) -> AlterUserScramCredentialsResponse:
    """Upsert and delete SCRAM credentials; only the active controller serves it."""
    controller = broker.controller
    upsertions = list(request.upsertions or [])
    deletions = list(request.deletions or [])
    users = dict.fromkeys(e.name for e in (*upsertions, *deletions))
    # Kafka's handleAlterUserScramCredentialsRequest: not the controller first, then Alter
    # on the cluster; either refuses every user.
    refused: tuple[int, str] | None = None
    if controller is None or not controller.is_active:
        refused = (_NOT_CONTROLLER, "This is not the correct controller for this cluster.")
    elif not broker.auth.authorize_cluster(ctx, AclOperation.ALTER):
        refused = (_CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    if refused is not None:
        return AlterUserScramCredentialsResponse(
            throttle_time_ms=0,
            results=[
                _AlterResult(user=u, error_code=refused[0], error_message=refused[1]) for u in users
            ],
        )
    return await asyncio.to_thread(_alter, broker, upsertions, deletions)
