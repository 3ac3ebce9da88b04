"""Plan waves -> PartitionReassignment manifests; write them as YAML or create them in Kubernetes.

Each wave becomes one ``kpo.dev/v1alpha1`` PartitionReassignment named ``<plan>-wave-<n>``
(``n`` from 1), or several named ``<plan>-wave-<n>-1``, ``-2``... when the wave holds more
than the CRD's 2000 partitions (:func:`kpo_kafka.manifests.to_manifests` does the cut
and checks each object against the CRD model). Every object carries:

* labels ``kpo.dev/plan: <plan>`` and ``kpo.dev/wave: "<n>"`` (select a wave with
  ``kubectl get pr -l kpo.dev/plan=<plan>,kpo.dev/wave=1``);
* annotations ``kpo.dev/bytes-to-move`` (bytes the new replicas copy from the leaders),
  ``kpo.dev/predicted-duration-seconds`` and ``kpo.dev/predicted-duration`` (at the
  throttle, computed as the operator's own ETA for a suspended object:
  :func:`kpo_kafka.copy_time.throttled_duration`, the busiest broker's bytes to send or
  receive divided by the rate; ``unthrottled`` without a throttle); when a wave is split,
  also ``kpo.dev/wave-bytes-to-move`` and ``kpo.dev/wave-predicted-duration-seconds`` for
  the whole wave;
* ``spec.throttle.replicationRate`` (bytes/s, KIP-73) when a throttle is given;
* ``spec.suspend: true`` unless the plan is to run at once, so that nothing moves until a
  person (or the next step of a pipeline) unsuspends the wave;
* ``spec.preferredLeaderElection: true`` when a move changes a partition's preferred leader.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from kpo_kafka.copy_time import PlannedCopy, format_duration, throttled_duration
from kpo_kafka.manifests import ManifestError, ManifestOptions, dump_manifests, to_manifests
from kpo_kafka.specs import PartitionTarget

GROUP = "kpo.dev"
"""API group of the custom resources."""
VERSION = "v1alpha1"
"""API version of the custom resources."""
PLURAL = "partitionreassignments"
"""Plural resource name of PartitionReassignment."""
PLAN_LABEL = "kpo.dev/plan"
WAVE_LABEL = "kpo.dev/wave"
BYTES_ANNOTATION = "kpo.dev/bytes-to-move"
SECONDS_ANNOTATION = "kpo.dev/predicted-duration-seconds"
DURATION_ANNOTATION = "kpo.dev/predicted-duration"
WAVE_BYTES_ANNOTATION = "kpo.dev/wave-bytes-to-move"
WAVE_SECONDS_ANNOTATION = "kpo.dev/wave-predicted-duration-seconds"

_LABEL_VALUE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class ApplyError(RuntimeError):
    """The Kubernetes API refused to create an object; the message names it and the reason."""


@dataclass(frozen=True)
class ReplicaMove:
    """One partition's change of replicas in a plan.

    Attributes:
        topic: Topic name.
        partition: Partition index.
        old_replicas: Current replica ids (OAR), preferred leader first.
        new_replicas: Target replica ids (RAR), preferred leader first.
        leader: Current leader id (the source of the copies), -1 if none.
        size_bytes: Bytes of one replica (the leader's log size).
    """

    topic: str
    partition: int
    old_replicas: tuple[int, ...]
    new_replicas: tuple[int, ...]
    leader: int
    size_bytes: int

    @property
    def adding(self) -> tuple[int, ...]:
        """Brokers that get a new replica (RAR minus OAR), in target order."""
        return tuple(b for b in self.new_replicas if b not in self.old_replicas)

    @property
    def bytes_to_move(self) -> int:
        """Bytes copied: the replica size times the number of replicas added."""
        return self.size_bytes * len(self.adding)

    @property
    def changes_preferred_leader(self) -> bool:
        """Whether the first replica changes (a preferred election is then wanted)."""
        return self.old_replicas[:1] != self.new_replicas[:1]


@dataclass(frozen=True)
class ManifestSettings:
    """What every manifest of a plan shares.

    Attributes:
        plan: Plan name: object name prefix and ``kpo.dev/plan`` label value (a DNS label
            of at most 63 characters, so it is also a valid label value).
        namespace: ``metadata.namespace``; left out when ``None``.
        throttle: ``spec.throttle.replicationRate`` in bytes/s, ``None`` for no throttle.
        run_now: ``False`` (default) writes ``spec.suspend: true``.
    """

    plan: str
    namespace: str | None = None
    throttle: int | None = None
    run_now: bool = False

    def problems(self) -> list[str]:
        """Return what is wrong with the settings (empty when fine)."""
        if len(self.plan) > 63 or not _LABEL_VALUE.match(self.plan):
            return [
                f"plan: {self.plan!r} must be 1-63 lowercase letters, digits, '-' or '.', "
                "starting and ending with a letter or digit"
            ]
        return []


def predicted_seconds(moves: Sequence[ReplicaMove], throttle: int | None) -> float | None:
    """Seconds to copy ``moves`` at a throttle of ``throttle`` bytes/s; ``None`` unthrottled.

    Same model as the operator's ETA of a not-yet-started reassignment
    (:func:`kpo_kafka.copy_time.throttled_duration`: Kafka's leader and follower
    ``ReplicationQuotaManager`` on each broker, KIP-73).
    """
    parts = [
        PlannedCopy(m.leader if m.leader >= 0 else m.old_replicas[0], m.adding, m.bytes_to_move)
        for m in moves
    ]
    duration = throttled_duration(parts, throttle)
    return None if duration is None else duration.total_seconds()


def _annotate(manifest: dict[str, Any], moves: Sequence[ReplicaMove], throttle: int | None) -> None:
    seconds = predicted_seconds(moves, throttle)
    notes = manifest["metadata"].setdefault("annotations", {})
    notes[BYTES_ANNOTATION] = str(sum(m.bytes_to_move for m in moves))
    if seconds is None:
        notes[DURATION_ANNOTATION] = "unthrottled"
    else:
        notes[SECONDS_ANNOTATION] = f"{seconds:.1f}"
        notes[DURATION_ANNOTATION] = format_duration(timedelta(seconds=seconds))


def wave_manifests(
    waves: Sequence[Sequence[ReplicaMove]], settings: ManifestSettings
) -> list[dict[str, Any]]:
    """Build the PartitionReassignment objects of a plan, wave by wave, in order.

    Args:
        waves: The moves of each wave (wave 1 first); empty waves are skipped but keep
            their number.
        settings: Plan name, namespace, throttle, suspension.

    Returns:
        The objects as dicts, ready for YAML or the Kubernetes API.

    Raises:
        ManifestError: Bad settings, or a move the CRD model refuses (names the object).
    """
    errors = settings.problems()
    if errors:
        raise ManifestError(errors)
    manifests: list[dict[str, Any]] = []
    for number, moves in enumerate(waves, start=1):
        if not moves:
            continue
        targets = [
            PartitionTarget(topic=m.topic, partition=m.partition, replicas=list(m.new_replicas))
            for m in moves
        ]
        options = ManifestOptions(
            name=f"{settings.plan}-wave-{number}",
            namespace=settings.namespace,
            throttle=settings.throttle,
            preferred_leader_election=any(m.changes_preferred_leader for m in moves),
            suspend=not settings.run_now,
        )
        objects = to_manifests(targets, options)
        offset = 0
        for manifest in objects:
            count = len(manifest["spec"]["partitions"])
            labels = manifest["metadata"].setdefault("labels", {})
            labels[PLAN_LABEL] = settings.plan
            labels[WAVE_LABEL] = str(number)
            _annotate(manifest, moves[offset : offset + count], settings.throttle)
            offset += count
            if len(objects) > 1:
                notes = manifest["metadata"]["annotations"]
                notes[WAVE_BYTES_ANNOTATION] = str(sum(m.bytes_to_move for m in moves))
                wave_seconds = predicted_seconds(moves, settings.throttle)
                if wave_seconds is not None:
                    notes[WAVE_SECONDS_ANNOTATION] = f"{wave_seconds:.1f}"
        manifests.extend(objects)
    return manifests


def manifests_yaml(manifests: Sequence[dict[str, Any]]) -> str:
    """Return the objects as one YAML text, ``---`` separated when several.

    Same layout as ``kpo-reassign`` (:func:`kpo_kafka.manifests.dump_manifests`): key order
    kept, replica lists inline.
    """
    return dump_manifests(manifests)


def write_manifests(manifests: Sequence[dict[str, Any]], directory: Path) -> list[Path]:
    """Write one ``<metadata.name>.yaml`` file per object into ``directory`` (created).

    Raises:
        OSError: The directory cannot be written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for manifest in manifests:
        path = directory / f"{manifest['metadata']['name']}.yaml"
        path.write_text(dump_manifests([manifest]))
        paths.append(path)
    return paths


def apply_manifests(
    manifests: Sequence[dict[str, Any]], api_client: Any, namespace: str
) -> list[str]:
    """Create the objects in ``namespace`` through the CustomObjectsApi, in order.

    Objects already created are left in place when a later one fails.

    Args:
        manifests: Objects from :func:`wave_manifests`.
        api_client: A ``kubernetes.client.ApiClient``.
        namespace: Target namespace (overrides ``metadata.namespace``).

    Returns:
        The names created.

    Raises:
        ApplyError: The API server refused an object (e.g. 409 AlreadyExists, 422 Invalid).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    api = client.CustomObjectsApi(api_client)
    created: list[str] = []
    for manifest in manifests:
        body = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
        name = body["metadata"]["name"]
        try:
            api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
        except ApiException as exc:
            raise ApplyError(
                f"{namespace}/{name}: {exc.status} {exc.reason}: {exc.body}; "
                f"created before the failure: {created or 'none'}"
            ) from exc
        created.append(name)
    return created
