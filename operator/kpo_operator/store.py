"""The operator's view of its custom resources in the Kubernetes API (I/O edge).

:class:`ObjectStore` is the small interface the reconcilers use: read one object
fresh, list all objects of a kind in the watched namespaces, merge-patch the
``status`` subresource, and record an Event on an object. :class:`KubeObjectStore`
implements it with the official ``kubernetes`` client; unit tests use an
in-memory store.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from kpo_operator.resources import GROUP, VERSION, ResourceKind

logger = logging.getLogger(__name__)

Object = dict[str, Any]
"""A custom resource as the API returns it (``apiVersion``, ``kind``, ``metadata``, ...)."""

NORMAL = "Normal"
WARNING = "Warning"

REPORTING_COMPONENT = "kpo-operator"


class ObjectStoreError(RuntimeError):
    """The Kubernetes API refused or failed a call (the reconciler retries later)."""


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` of an object, the operator's name for it in messages and owners."""
    meta = obj.get("metadata", {})
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def plain_copy(body: Mapping[str, Any]) -> Object | None:
    """Copy an object handed over by kopf (a live view) into a plain dict, consistently.

    kopf replaces a timer's live body as watch events arrive (from another thread), so the
    top-level keys are copied and ``metadata.resourceVersion`` checked before and after:
    ``None`` when the body changed meanwhile or has no version. Nested values are shared,
    not copied (kopf replaces the whole body, never edits it); the caller must not edit
    them in place.
    """
    before = (body.get("metadata") or {}).get("resourceVersion")
    copied = {key: body[key] for key in list(body)}
    meta = dict(copied.get("metadata") or {})
    after = (body.get("metadata") or {}).get("resourceVersion")
    if not before or before != after or meta.get("resourceVersion") != before:
        return None
    copied["metadata"] = meta
    return copied


class ObjectStore(Protocol):
    """What the reconcilers need from the Kubernetes API."""

    def get(
        self, kind: ResourceKind, namespace: str, name: str, known: Object | None = None
    ) -> Object | None:
        """Read one object; ``None`` when it does not exist (any more).

        ``known``, a copy the caller holds (kopf's body, :func:`plain_copy`), is returned
        instead of reading when its ``metadata.resourceVersion`` is the latest this store
        has seen of the object (read or written through it): nothing changed since.
        """
        ...

    def list(self, kind: ResourceKind) -> list[Object]:
        """Every object of ``kind`` in the watched namespaces."""
        ...

    def patch_status(
        self, kind: ResourceKind, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Object | None:
        """Merge-patch ``status`` (RFC 7386: ``None`` values delete keys, lists are replaced).

        Returns:
            The object as the API server answered the patch (with its new
            ``metadata.resourceVersion``); ``None`` when it does not exist any more.
        """
        ...

    def create(self, kind: ResourceKind, namespace: str, body: Mapping[str, Any]) -> Object | None:
        """Create an object; ``None`` when one of that name exists already (409 Conflict).

        Raises:
            ObjectStoreError: The API server refused it for another reason.
        """
        ...

    def patch(
        self, kind: ResourceKind, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Object | None:
        """Merge-patch the object (``spec``, ``metadata``; RFC 7386); ``None``: it is gone.

        Raises:
            ObjectStoreError: The API server refused the patch.
        """
        ...

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about ``obj`` (``type_``: Normal or Warning)."""
        ...


def kube_api_client() -> Any:
    """Build a ``kubernetes.client.ApiClient``: in-cluster service account, else ``KUBECONFIG``."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


class KubeObjectStore:
    """:class:`ObjectStore` over the ``kubernetes`` client.

    Args:
        namespaces: The watched namespaces; empty means every namespace.
        api_client: A configured ``kubernetes.client.ApiClient``; by default one is
            built from the in-cluster service account or ``KUBECONFIG``.
    """

    def __init__(self, namespaces: Sequence[str] = (), api_client: Any = None) -> None:
        from kubernetes import client

        if api_client is None:
            api_client = kube_api_client()
        self.namespaces = tuple(namespaces)
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)
        self._client = client
        # (plural, namespace, name) -> the latest resourceVersion read or written here
        self._versions: dict[tuple[str, str, str], str] = {}

    def _saw(self, kind: ResourceKind, namespace: str, name: str, obj: Any) -> None:
        """Remember the resourceVersion of an answer about the object (or forget it)."""
        version = obj.get("metadata", {}).get("resourceVersion") if isinstance(obj, dict) else None
        if version:
            self._versions[(kind.plural, namespace, name)] = str(version)
        else:
            self._versions.pop((kind.plural, namespace, name), None)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            raise ObjectStoreError(f"{what}: {exc.status} {exc.reason}: {exc.body}") from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"{what}: {exc}") from exc

    def get(
        self, kind: ResourceKind, namespace: str, name: str, known: Object | None = None
    ) -> Object | None:
        """See :meth:`ObjectStore.get`."""
        from kubernetes.client.exceptions import ApiException

        if known is not None:
            version = (known.get("metadata") or {}).get("resourceVersion")
            if version and version == self._versions.get((kind.plural, namespace, name)):
                return known
        try:
            found: Any = self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, kind.plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                self._versions.pop((kind.plural, namespace, name), None)
                return None
            raise ObjectStoreError(f"get {kind.kind} {namespace}/{name}: {exc.reason}") from exc
        self._saw(kind, namespace, name, found)
        return dict(found)

    def list(self, kind: ResourceKind) -> list[Object]:
        """See :meth:`ObjectStore.list`."""
        items: list[Object] = []
        if not self.namespaces:
            answer = self._call(
                f"list {kind.plural}",
                self._custom.list_cluster_custom_object,
                GROUP,
                VERSION,
                kind.plural,
            )
            items.extend(answer.get("items", []))
        for namespace in self.namespaces:
            answer = self._call(
                f"list {kind.plural} in {namespace}",
                self._custom.list_namespaced_custom_object,
                GROUP,
                VERSION,
                namespace,
                kind.plural,
            )
            items.extend(answer.get("items", []))
        listed = {
            (kind.plural, o["metadata"].get("namespace") or "", o["metadata"]["name"])
            for o in items
        }
        for key in [k for k in list(self._versions) if k[0] == kind.plural and k not in listed]:
            if not self.namespaces or key[1] in self.namespaces:
                self._versions.pop(key, None)  # deleted: forget it (bounded memory)
        return items

    def patch_status(
        self, kind: ResourceKind, namespace: str, name: str, status: Mapping[str, Any]
    ) -> Object | None:
        """See :meth:`ObjectStore.patch_status`; a vanished object is ignored (``None``)."""
        return self._merge_patch(
            self._custom.patch_namespaced_custom_object_status,
            f"patch status of {kind.kind}",
            kind,
            namespace,
            name,
            {"status": dict(status)},
        )

    def _merge_patch(
        self,
        send: Any,
        what: str,
        kind: ResourceKind,
        namespace: str,
        name: str,
        body: Mapping[str, Any],
    ) -> Object | None:
        """Send a JSON merge patch (RFC 7386) with ``send``; ``None`` when the object is gone."""
        from kubernetes.client.exceptions import ApiException

        try:
            patched: Any = send(
                GROUP,
                VERSION,
                namespace,
                kind.plural,
                name,
                dict(body),
                _content_type="application/merge-patch+json",
            )
        except ApiException as exc:
            if exc.status == 404:
                self._versions.pop((kind.plural, namespace, name), None)
                return None
            raise ObjectStoreError(f"{what} {namespace}/{name}: {exc.status} {exc.body}") from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"{what} {namespace}/{name}: {exc}") from exc
        self._saw(kind, namespace, name, patched)
        return dict(patched) if isinstance(patched, dict) else None

    def create(self, kind: ResourceKind, namespace: str, body: Mapping[str, Any]) -> Object | None:
        """See :meth:`ObjectStore.create`."""
        from kubernetes.client.exceptions import ApiException

        name = str((body.get("metadata") or {}).get("name"))
        try:
            created: Any = self._custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, kind.plural, dict(body)
            )
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise ObjectStoreError(
                f"create {kind.kind} {namespace}/{name}: {exc.status} {exc.body}"
            ) from exc
        except Exception as exc:  # connection errors of urllib3
            raise ObjectStoreError(f"create {kind.kind} {namespace}/{name}: {exc}") from exc
        self._saw(kind, namespace, name, created)
        return dict(created) if isinstance(created, dict) else None

    def patch(
        self, kind: ResourceKind, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> Object | None:
        """See :meth:`ObjectStore.patch`."""
        return self._merge_patch(
            self._custom.patch_namespaced_custom_object,
            f"patch {kind.kind}",
            kind,
            namespace,
            name,
            patch,
        )

    def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """See :meth:`ObjectStore.event`; failures are logged, never raised."""
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        now = datetime.now(UTC)
        body = self._client.CoreV1Event(
            metadata=self._client.V1ObjectMeta(generate_name=f"{meta.get('name', 'kpo')}."),
            involved_object=self._client.V1ObjectReference(
                api_version=obj.get("apiVersion"),
                kind=obj.get("kind"),
                name=meta.get("name"),
                namespace=namespace,
                uid=meta.get("uid"),
                resource_version=meta.get("resourceVersion"),
            ),
            type=type_,
            reason=reason,
            message=message[:1024],
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=self._client.V1EventSource(component=REPORTING_COMPONENT),
            reporting_component=REPORTING_COMPONENT,
            reporting_instance=REPORTING_COMPONENT,
        )
        try:
            self._core.create_namespaced_event(namespace, body)
        except Exception as exc:  # an Event is best effort, as in client-go's recorder
            logger.warning("could not record event %s on %s: %s", reason, object_key(obj), exc)
