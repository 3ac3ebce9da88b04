"""Build, read back and print PartitionReassignment manifests (``kpo.dev/v1alpha1``, pure).

A PartitionReassignment holds at most :data:`MAX_PARTITIONS_PER_OBJECT` partitions,
so larger moves become several objects named ``<name>-1``, ``<name>-2``, ... A
``log_dirs`` list made only of ``"any"`` means "no log-dir move" to Kafka
(``kafka-reassign-partitions``) and is left out of the manifest. Every manifest is
checked against the CRD model (:class:`~kpo_kafka.specs.PartitionReassignmentSpec`)
before it is returned; :func:`dump_manifests` prints them as YAML for ``kubectl apply``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from kpo_kafka.reassignment_json import ConversionError
from kpo_kafka.specs import ANY_LOG_DIR, PartitionReassignmentSpec, PartitionTarget, SpecError
from kpo_kafka.topic_partition import TopicPartition

API_VERSION = "kpo.dev/v1alpha1"
"""``apiVersion`` of the PartitionReassignment custom resource."""
KIND = "PartitionReassignment"
"""``kind`` of the custom resource."""
MAX_PARTITIONS_PER_OBJECT = 2000
"""``maxItems`` of ``spec.partitions`` in the CRD."""

_INT64_MAX = 2**63 - 1
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ManifestError(ConversionError):
    """A PartitionReassignment manifest, or the options to build one, is invalid."""


@dataclass(frozen=True)
class ManifestOptions:
    """What a PartitionReassignment manifest carries besides its partitions.

    Attributes:
        name: ``metadata.name`` (a DNS-1123 subdomain); ``<name>-<n>`` when split.
        namespace: ``metadata.namespace``, left out when ``None``.
        throttle: ``spec.throttle.replicationRate`` in bytes/s (Kafka's ``--throttle``).
        preferred_leader_election: ``spec.preferredLeaderElection``.
        suspend: ``spec.suspend`` (plan only, move nothing yet).
    """

    name: str
    namespace: str | None = None
    throttle: int | None = None
    preferred_leader_election: bool = False
    suspend: bool = False

    def problems(self, objects: int = 1) -> list[str]:
        """Return what is wrong with these options for ``objects`` manifests (empty if fine)."""
        errors: list[str] = []
        longest = self.name if objects == 1 else f"{self.name}-{objects}"
        if not _DNS_SUBDOMAIN.match(self.name) or len(longest) > 253:
            errors.append(
                f"name: {longest!r} is not a valid object name (lowercase letters, digits, "
                "'-' and '.', at most 253 characters)"
            )
        if self.namespace is not None and (
            not _DNS_LABEL.match(self.namespace) or len(self.namespace) > 63
        ):
            errors.append(f"namespace: {self.namespace!r} is not a valid namespace name")
        if self.throttle is not None and not 1 <= self.throttle <= _INT64_MAX:
            errors.append(f"throttle: {self.throttle} must be at least 1 byte/s")
        return errors


def _manifest_entry(target: PartitionTarget) -> dict[str, Any]:
    entry: dict[str, Any] = {"topic": target.topic, "partition": target.partition}
    entry["replicas"] = list(target.replicas)
    if target.log_dirs is not None and any(d != ANY_LOG_DIR for d in target.log_dirs):
        entry["logDirs"] = list(target.log_dirs)
    return entry


def to_manifests(
    targets: Sequence[PartitionTarget], options: ManifestOptions
) -> list[dict[str, Any]]:
    """Build PartitionReassignment objects holding ``targets``, in order.

    Up to :data:`MAX_PARTITIONS_PER_OBJECT` targets give one object named
    ``options.name``; more are cut, in order, into objects of at most that many
    partitions named ``<name>-1``, ``<name>-2``, ... each with the same options.

    Raises:
        ManifestError: No targets, invalid options, or an object the CRD model
            (:class:`~kpo_kafka.specs.PartitionReassignmentSpec`) refuses.
    """
    if not targets:
        raise ManifestError(["partitions: nothing to reassign"])
    size = MAX_PARTITIONS_PER_OBJECT
    chunks = [targets[i : i + size] for i in range(0, len(targets), size)]
    errors = options.problems(len(chunks))
    if errors:
        raise ManifestError(errors)
    manifests: list[dict[str, Any]] = []
    for number, chunk in enumerate(chunks, start=1):
        metadata: dict[str, Any] = {
            "name": options.name if len(chunks) == 1 else f"{options.name}-{number}"
        }
        if options.namespace is not None:
            metadata["namespace"] = options.namespace
        spec: dict[str, Any] = {"partitions": [_manifest_entry(t) for t in chunk]}
        if options.throttle is not None:
            spec["throttle"] = {"replicationRate": options.throttle}
        if options.preferred_leader_election:
            spec["preferredLeaderElection"] = True
        if options.suspend:
            spec["suspend"] = True
        manifest = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}
        try:
            PartitionReassignmentSpec.from_object(manifest)
        except SpecError as exc:
            raise ManifestError([f"{metadata['name']}: {e}" for e in exc.errors]) from exc
        manifests.append(manifest)
    return manifests


@dataclass(frozen=True)
class ParsedManifest:
    """One PartitionReassignment read back from YAML.

    Attributes:
        name: ``metadata.name`` (``""`` when absent).
        spec: The checked spec.
    """

    name: str
    spec: PartitionReassignmentSpec


def parse_manifests(objects: Iterable[object]) -> list[ParsedManifest]:
    """Check decoded objects (YAML documents) as PartitionReassignments.

    Raises:
        ManifestError: An object is not a ``kpo.dev/v1alpha1`` PartitionReassignment or
            its spec does not match the CRD; each problem names its object, e.g.
            ``objects[1] (move-2): spec.partitions[0].replicas: ...``; also when there
            is no object at all.
    """
    errors: list[str] = []
    parsed: list[ParsedManifest] = []
    for where, obj in ((f"objects[{i}]", o) for i, o in enumerate(objects)):
        if not isinstance(obj, Mapping):
            errors.append(f"{where}: must be a mapping")
            continue
        if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
            errors.append(
                f"{where}: is {obj.get('apiVersion')}/{obj.get('kind')}, not {API_VERSION}/{KIND}"
            )
            continue
        metadata = obj.get("metadata")
        name = str(metadata.get("name", "")) if isinstance(metadata, Mapping) else ""
        label = f"{where} ({name})" if name else where
        if "spec" not in obj:
            errors.append(f"{label}: spec: missing")
            continue
        try:
            parsed.append(ParsedManifest(name, PartitionReassignmentSpec.from_object(obj)))
        except SpecError as exc:
            errors.extend(f"{label}: {e}" for e in exc.errors)
    if not errors and not parsed:
        errors.append("no PartitionReassignment object found")
    if errors:
        raise ManifestError(errors)
    return parsed


def merge_targets(manifests: Sequence[ParsedManifest]) -> list[PartitionTarget]:
    """Concatenate the partitions of ``manifests`` in order, for one Kafka JSON document.

    Raises:
        ManifestError: A partition appears twice (in one object or across objects).
    """
    seen: dict[TopicPartition, str] = {}
    errors: list[str] = []
    targets: list[PartitionTarget] = []
    for number, manifest in enumerate(manifests):
        owner = manifest.name or f"object {number}"
        for index, target in enumerate(manifest.spec.partitions):
            if target.key in seen:
                errors.append(
                    f"{owner}: spec.partitions[{index}]: partition {target.topic}-"
                    f"{target.partition} is already listed in {seen[target.key]}"
                )
                continue
            seen[target.key] = owner
            targets.append(target)
    if errors:
        raise ManifestError(errors)
    return targets


class _ManifestDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, writing lists of scalars inline (``replicas: [2, 1]``)."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    inline = bool(data) and all(isinstance(v, int | str) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=inline)


_ManifestDumper.add_representer(list, _represent_list)


def dump_manifests(manifests: Sequence[dict[str, Any]]) -> str:
    """Serialise manifests as YAML, keeping key order; several become a multi-document stream."""
    return yaml.dump_all(
        manifests,
        Dumper=_ManifestDumper,
        sort_keys=False,
        default_flow_style=False,
        explicit_start=len(manifests) > 1,
    )
