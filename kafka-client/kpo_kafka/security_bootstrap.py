"""Create the chart's SCRAM users and their ACLs through the Admin API (the chart's bootstrap Job).

The chart's secure install runs ``python -m kpo_kafka.security_bootstrap`` in a Helm
post-install/post-upgrade hook Job. It connects to the brokers' inter-broker listener
with mutual TLS as the brokers' own super-user identity (the client settings come from
``KPO_KAFKA_*`` variables, :func:`kpo_kafka.client_config.client_security_from_env`),
then, as Kafka's tools would:

1. ``kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users``:
   AlterUserScramCredentials (KIP-554) for every user, sent to the active controller as
   Kafka's AdminClient does in ZooKeeper mode (NOT_CONTROLLER is retried);
2. ``kafka-acls --add``: CreateAcls with each user's ACLs, when the plan says that
   authorization is on (creating an ACL that exists is a no-op in Kafka).

The plan is a JSON file (``KPO_SECURITY_PLAN``), rendered by the chart::

    {"authorization": true,
     "users": [{"name": "kpo-operator", "mechanism": "SCRAM-SHA-512",
                "passwordFile": "/etc/kpo/users/kpo-operator/password",
                "acls": [{"resourceType": "Cluster", "resourceName": "kafka-cluster",
                          "patternType": "LITERAL", "operation": "Alter"}]}]}

Each ACL allows ``User:<name>`` from any host. Brokers that are not up yet are waited
for, until ``KPO_BOOTSTRAP_TIMEOUT_S`` (default 600) seconds have passed. Passwords are
read from files (mounted Secrets) and never logged.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourceType,
)
from kafka.admin._users import UserScramCredentialUpsertion
from kafka.protocol.admin import AlterUserScramCredentialsRequest

from kpo_kafka.client_config import client_security_from_env

__all__ = ["AclSpec", "BootstrapError", "SecurityPlan", "UserSpec", "acl_objects", "main", "run"]

_log = logging.getLogger("kpo_kafka.security_bootstrap")

#: Kafka's NOT_CONTROLLER error code: AlterUserScramCredentials reached another broker.
_NOT_CONTROLLER = 41
_OPERATIONS = {
    "Read": ACLOperation.READ,
    "Write": ACLOperation.WRITE,
    "Create": ACLOperation.CREATE,
    "Delete": ACLOperation.DELETE,
    "Alter": ACLOperation.ALTER,
    "Describe": ACLOperation.DESCRIBE,
    "ClusterAction": ACLOperation.CLUSTER_ACTION,
    "DescribeConfigs": ACLOperation.DESCRIBE_CONFIGS,
    "AlterConfigs": ACLOperation.ALTER_CONFIGS,
    "IdempotentWrite": ACLOperation.IDEMPOTENT_WRITE,
}
_RESOURCE_TYPES = {
    "Topic": ResourceType.TOPIC,
    "Group": ResourceType.GROUP,
    "Cluster": ResourceType.CLUSTER,
    "TransactionalId": ResourceType.TRANSACTIONAL_ID,
}
_PATTERN_TYPES = {
    "LITERAL": ACLResourcePatternType.LITERAL,
    "PREFIXED": ACLResourcePatternType.PREFIXED,
}


class BootstrapError(RuntimeError):
    """The plan is malformed, or the brokers refused or never answered."""


@dataclass(frozen=True)
class AclSpec:
    """One ALLOW ACL of a user.

    Attributes:
        resource_type: ``Topic``, ``Group``, ``Cluster`` or ``TransactionalId``.
        resource_name: the resource (``kafka-cluster`` for the Cluster, ``*`` for all).
        pattern_type: ``LITERAL`` or ``PREFIXED``.
        operation: a ``kafka-acls --operation`` name, e.g. ``Alter``.
    """

    resource_type: str
    resource_name: str
    pattern_type: str
    operation: str


@dataclass(frozen=True)
class UserSpec:
    """A SCRAM user to create.

    Attributes:
        name: the user name (principal ``User:<name>``).
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        password_file: file holding the password (trailing newlines ignored).
        acls: the user's ACLs.
    """

    name: str
    mechanism: str
    password_file: Path
    acls: tuple[AclSpec, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class SecurityPlan:
    """What the bootstrap creates.

    Attributes:
        users: the SCRAM users.
        authorization: whether to create their ACLs.
    """

    users: tuple[UserSpec, ...]
    authorization: bool

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> SecurityPlan:
        """Read a plan (see the module docstring).

        Raises:
            BootstrapError: a missing field, an unknown mechanism, resource type, pattern
                type or operation.
        """
        try:
            users = tuple(
                UserSpec(
                    str(user["name"]),
                    str(user.get("mechanism", "SCRAM-SHA-512")),
                    Path(user["passwordFile"]),
                    tuple(
                        AclSpec(
                            str(acl["resourceType"]),
                            str(acl["resourceName"]),
                            str(acl.get("patternType", "LITERAL")),
                            str(acl["operation"]),
                        )
                        for acl in user.get("acls", [])
                    ),
                )
                for user in document["users"]
            )
        except (KeyError, TypeError) as exc:
            raise BootstrapError(f"malformed security plan: missing {exc}") from None
        for user in users:
            if user.mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise BootstrapError(f"user {user.name}: unknown mechanism {user.mechanism}")
            acl_objects(user)  # validates the names
        return cls(users, bool(document.get("authorization", False)))


def acl_objects(user: UserSpec) -> list[ACL]:
    """Return kafka-python ``ACL`` values allowing ``User:<name>`` each operation, from any host.

    Raises:
        BootstrapError: an unknown resource type, pattern type or operation.
    """
    acls = []
    for spec in user.acls:
        try:
            pattern = ResourcePattern(
                _RESOURCE_TYPES[spec.resource_type],
                spec.resource_name,
                _PATTERN_TYPES[spec.pattern_type],
            )
            operation = _OPERATIONS[spec.operation]
        except KeyError as exc:
            raise BootstrapError(f"user {user.name}: unknown ACL value {exc}") from None
        acls.append(ACL(f"User:{user.name}", "*", operation, ACLPermissionType.ALLOW, pattern))
    return acls


def _password(user: UserSpec) -> str:
    try:
        password = user.password_file.read_text().rstrip("\r\n")
    except OSError as exc:
        raise BootstrapError(f"user {user.name}: cannot read its password file: {exc}") from None
    if not password:
        raise BootstrapError(f"user {user.name}: empty password")
    return password


def _alter_credentials(admin: Any, users: Sequence[UserSpec]) -> dict[str, tuple[int, str]]:
    """Send AlterUserScramCredentials to the controller; return user -> (error code, message)."""
    controller = admin.describe_cluster()["controller_id"]
    if controller is None or controller < 0:
        return {u.name: (_NOT_CONTROLLER, "no controller yet") for u in users}
    upsertions = []
    for user in users:
        upsert = UserScramCredentialUpsertion(user.name, user.mechanism, _password(user))
        upsertions.append(
            (
                upsert.user,
                int(upsert.mechanism),
                upsert.iterations,
                upsert.salt,
                upsert.salted_password,
            )
        )
    request = AlterUserScramCredentialsRequest(deletions=[], upsertions=upsertions)
    response = admin._manager.run(admin._manager.send, request, controller)
    return {r.user: (r.error_code, r.error_message or "") for r in response.results}


def run(
    plan: SecurityPlan, bootstrap_servers: str, client: Mapping[str, Any], timeout_s: float
) -> None:
    """Create the plan's users (and ACLs) against ``bootstrap_servers``.

    Args:
        plan: what to create.
        bootstrap_servers: ``host:port,...`` of the listener to use.
        client: kafka-python security keyword arguments.
        timeout_s: how long to wait for the brokers and a controller.

    Raises:
        BootstrapError: a user or ACL was refused, or the brokers never answered.
    """
    deadline = time.monotonic() + timeout_s
    pending = list(plan.users)
    acls_pending = plan.authorization
    last = ""
    while pending or acls_pending:
        if time.monotonic() > deadline:
            raise BootstrapError(f"gave up after {timeout_s:.0f} s: {last}")
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap_servers, request_timeout_ms=15000, **client
            )
        except Exception as exc:  # brokers not up yet: wait
            last = f"brokers unreachable ({type(exc).__name__}: {exc})"
            _log.info("waiting: %s", last)
            time.sleep(3)
            continue
        try:
            if pending:
                pending = _create_users(admin, pending)
                if pending:
                    last = "the controller moved"
                    time.sleep(1)
                    continue
            if acls_pending:
                _create_acls(admin, plan.users)
                acls_pending = False
        except BootstrapError:
            raise
        except Exception as exc:  # a broker or the controller went away: retry
            last = f"{type(exc).__name__}: {exc}"
            _log.info("retrying: %s", last)
            time.sleep(3)
        finally:
            admin.close()


def _create_users(admin: Any, users: Sequence[UserSpec]) -> list[UserSpec]:
    """Create ``users``' credentials; return the ones to retry (NOT_CONTROLLER).

    Raises:
        BootstrapError: a user was refused for another reason.
    """
    results = _alter_credentials(admin, users)
    refused = {n: r for n, r in results.items() if r[0] not in (0, _NOT_CONTROLLER)}
    if refused:
        raise BootstrapError(
            "AlterUserScramCredentials refused: "
            + "; ".join(f"{n}: error {c} {m}" for n, (c, m) in sorted(refused.items()))
        )
    for name in sorted(n for n, (code, _) in results.items() if code == 0):
        _log.info("SCRAM credentials of %s created", name)
    return [u for u in users if results.get(u.name, (_NOT_CONTROLLER, ""))[0] != 0]


def _create_acls(admin: Any, users: Sequence[UserSpec]) -> None:
    acls = [acl for user in users for acl in acl_objects(user)]
    if not acls:
        return
    result = admin.create_acls(acls)
    if result["failed"]:
        raise BootstrapError(f"CreateAcls refused: {result['failed']}")
    _log.info("%d ACLs created for %d users", len(acls), len(users))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: read ``KPO_SECURITY_PLAN``, ``KPO_BOOTSTRAP_SERVERS`` and ``KPO_KAFKA_*``.

    Returns:
        0 on success, 1 on a :class:`BootstrapError` (logged), 2 on missing settings.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    env = os.environ
    if not env.get("KPO_SECURITY_PLAN") or not env.get("KPO_BOOTSTRAP_SERVERS"):
        _log.error("KPO_SECURITY_PLAN and KPO_BOOTSTRAP_SERVERS must be set")
        return 2
    try:
        plan = SecurityPlan.from_json(json.loads(Path(env["KPO_SECURITY_PLAN"]).read_text()))
        client = client_security_from_env(env).kafka_python_kwargs()
        run(
            plan,
            env["KPO_BOOTSTRAP_SERVERS"],
            client,
            float(env.get("KPO_BOOTSTRAP_TIMEOUT_S", "600")),
        )
    except (BootstrapError, ValueError, OSError) as exc:
        _log.error("security bootstrap failed: %s", exc)
        return 1
    _log.info("security bootstrap done: %d users", len(plan.users))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
