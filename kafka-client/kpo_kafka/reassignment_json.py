"""Convert between Kafka's reassignment JSON and PartitionReassignment manifests (pure, no I/O).

Kafka's ``kafka-reassign-partitions`` tool reads and writes a JSON document,
version 1 (seed 000 §2)::

    {"version": 1,
     "partitions": [{"topic": "test", "partition": 2, "replicas": [2, 1],
                     "log_dirs": ["any", "any"]}]}

``--generate`` prints two such documents under the headers ``Current partition
replica assignment`` and ``Proposed partition reassignment configuration``;
:func:`parse_reassignment_json` accepts either a bare document or that whole
output (it then reads the proposed one). Its checks follow
``ReassignPartitionsCommand`` (seed 000 §4.1: version 1 only, no empty or
duplicated partition list, no empty or duplicated replica list, one log dir per
replica; a missing ``version`` means 1) plus the CRD's bounds, and it refuses
unknown fields, which Kafka ignores, so that a misspelt ``log_dirs`` is not lost.

A PartitionReassignment (``kpo.dev/v1alpha1``) holds at most
:data:`MAX_PARTITIONS_PER_OBJECT` partitions, so larger moves become several
objects named ``<name>-1``, ``<name>-2``, ... A ``log_dirs`` list made only of
``"any"`` means "no log-dir move" to Kafka and is left out of the manifest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kpo_kafka.specs import ANY_LOG_DIR, PartitionReassignmentSpec, PartitionTarget, SpecError
from kpo_kafka.topic_partition import TopicPartition

KAFKA_JSON_VERSION = 1
"""The only reassignment JSON version Kafka defines."""
API_VERSION = "kpo.dev/v1alpha1"
"""``apiVersion`` of the PartitionReassignment custom resource."""
KIND = "PartitionReassignment"
"""``kind`` of the custom resource."""
MAX_PARTITIONS_PER_OBJECT = 2000
"""``maxItems`` of ``spec.partitions`` in the CRD."""

PROPOSED_HEADER = "Proposed partition reassignment configuration"
"""The header under which ``kafka-reassign-partitions --generate`` prints its proposal."""

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_MAX_REPLICAS = 32  # the CRD's maxItems for replicas and logDirs
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENTRY_FIELDS = ("topic", "partition", "replicas", "log_dirs")


class ConversionError(ValueError):
    """Input that cannot be converted.

    Attributes:
        errors: One line per problem, ``<path>: <message>``, naming the bad entry, e.g.
            ``partitions[3].replicas: broker 2 is listed twice``.
    """

    def __init__(self, errors: Sequence[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = list(errors)


class KafkaJsonError(ConversionError):
    """A reassignment JSON document is malformed."""


class ManifestError(ConversionError):
    """A PartitionReassignment manifest, or the options to build one, is invalid."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_within(value: object, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def topic_name_problem(value: object) -> str | None:
    """Return why ``value`` is not a legal Kafka topic name, or ``None`` if it is one."""
    if not isinstance(value, str):
        return "must be a string"
    if not _TOPIC.match(value) or value in (".", ".."):
        return f"{value!r} is not a legal topic name (1-249 characters of [a-zA-Z0-9._-])"
    return None


def _entry_problems(entry: Mapping[str, Any]) -> Iterator[str]:
    """Yield ``<field>: <problem>`` for each thing wrong in one reassignment entry."""
    yield from (f"{k}: unknown field" for k in entry if k not in _ENTRY_FIELDS)
    yield from (f"{k}: missing" for k in _ENTRY_FIELDS[:3] if k not in entry)
    replicas, log_dirs = entry.get("replicas"), entry.get("log_dirs")
    if "topic" in entry and (problem := topic_name_problem(entry["topic"])) is not None:
        yield f"topic: {problem}"
    if "partition" in entry and not _int_within(entry["partition"], 0, _INT32_MAX):
        yield f"partition: must be an integer from 0 to {_INT32_MAX}"
    if "replicas" in entry:
        if not isinstance(replicas, list) or not all(_is_int(b) for b in replicas):
            yield "replicas: must be a list of broker ids (integers)"
        elif not 1 <= len(replicas) <= _MAX_REPLICAS:
            yield f"replicas: must list 1 to {_MAX_REPLICAS} brokers, not {len(replicas)}"
        else:
            yield from (
                f"replicas: broker id {b} is out of range"
                for b in replicas
                if not _int_within(b, 0, _INT32_MAX)
            )
            yield from (
                f"replicas: broker {b} is listed twice"
                for b in sorted({b for b in replicas if replicas.count(b) > 1})
            )
    if log_dirs is None:
        return
    if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
        yield "log_dirs: must be a list of strings"
        return
    if isinstance(replicas, list) and len(log_dirs) != len(replicas):
        yield (
            f"log_dirs: has {len(log_dirs)} entries but replicas has {len(replicas)}; "
            "give one log dir per replica"
        )
    yield from (
        f'log_dirs: {d!r} is neither "any" nor an absolute path'
        for d in log_dirs
        if d != ANY_LOG_DIR and not d.startswith("/")
    )


def _check_entry(entry: object, path: str, errors: list[str]) -> PartitionTarget | None:
    """Return the entry at ``path`` as a target, or ``None`` after adding its problems."""
    if not isinstance(entry, Mapping):
        errors.append(f"{path}: must be an object")
        return None
    problems = [f"{path}.{p}" for p in _entry_problems(entry)]
    if not problems:
        fields = {"logDirs" if k == "log_dirs" else k: v for k, v in entry.items()}
        try:
            return PartitionTarget.model_validate(fields)
        except ValidationError as exc:  # a bound of the CRD not checked above
            problems = [f"{path}: {e['msg']}" for e in exc.errors()]
    errors.extend(problems)
    return None


def _partitions_of(data: object) -> tuple[list[Any], list[str]]:
    """Check a document's shape and version; return its partition list and problems so far."""
    if not isinstance(data, Mapping):
        raise KafkaJsonError(["document: must be a JSON object"])
    errors = [f"{key}: unknown field" for key in data if key not in ("version", "partitions")]
    version = data.get("version", KAFKA_JSON_VERSION)  # Kafka reads a missing version as 1
    if not _is_int(version):
        errors.append("version: must be an integer")
    elif version != KAFKA_JSON_VERSION:
        errors.append(f"version: unsupported version {version} (only 1 is supported)")
    entries = data.get("partitions")
    if not isinstance(entries, list):
        problem = "missing" if entries is None else "must be a list"
        raise KafkaJsonError([*errors, f"partitions: {problem}"])
    return entries, errors


def _loads(text: str, first: bool = False) -> Any:
    """Decode JSON text; with ``first``, only the value at its start (text may follow)."""
    try:
        return json.JSONDecoder().raw_decode(text.lstrip())[0] if first else json.loads(text)
    except json.JSONDecodeError as exc:
        raise KafkaJsonError([f"line {exc.lineno} column {exc.colno}: {exc.msg}"]) from exc


def parse_reassignment_data(data: object) -> list[PartitionTarget]:
    """Check a decoded reassignment JSON document and return its entries in order.

    Args:
        data: The decoded document, ``{"version": 1, "partitions": [...]}``.

    Returns:
        One :class:`~kpo_operator.model.PartitionTarget` per entry; ``log_dirs`` is kept
        as given (``None`` when absent).

    Raises:
        KafkaJsonError: Every problem found, each naming its entry
            (``partitions[3].replicas: ...``).
    """
    entries, errors = _partitions_of(data)
    if not entries:
        errors.append("partitions: the partition reassignment list is empty")
    targets: list[PartitionTarget] = []
    seen: dict[TopicPartition, int] = {}
    for index, entry in enumerate(entries):
        target = _check_entry(entry, f"partitions[{index}]", errors)
        if target is None:
            continue
        if target.key in seen:
            errors.append(
                f"partitions[{index}]: partition {target.topic}-{target.partition} is "
                f"already listed at partitions[{seen[target.key]}]"
            )
        seen.setdefault(target.key, index)
        targets.append(target)
    if errors:
        raise KafkaJsonError(errors)
    return targets


def parse_reassignment_json(text: str) -> list[PartitionTarget]:
    """Parse a reassignment JSON document, or the whole output of ``--generate``.

    When ``text`` contains the :data:`PROPOSED_HEADER` line, the JSON document that
    follows it is read (the current assignment above it is ignored).

    Raises:
        KafkaJsonError: The text is not JSON, or the document is malformed (see
            :func:`parse_reassignment_data`).
    """
    start = text.find(PROPOSED_HEADER)
    if start < 0:
        return parse_reassignment_data(_loads(text))
    return parse_reassignment_data(_loads(text[start + len(PROPOSED_HEADER) :], first=True))


def _entry(target: PartitionTarget, dirs_key: str, with_dirs: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"topic": target.topic, "partition": target.partition}
    entry["replicas"] = list(target.replicas)
    if with_dirs and target.log_dirs is not None:
        entry[dirs_key] = list(target.log_dirs)
    return entry


def reassignment_data(targets: Iterable[PartitionTarget]) -> dict[str, Any]:
    """Build Kafka's reassignment JSON document (version 1) from partition targets.

    ``log_dirs`` is written only for entries that have log dirs, as Kafka allows.
    """
    partitions = [_entry(t, "log_dirs", t.log_dirs is not None) for t in targets]
    return {"version": KAFKA_JSON_VERSION, "partitions": partitions}


def dump_reassignment_json(targets: Iterable[PartitionTarget], indent: int | None = None) -> str:
    """Serialise :func:`reassignment_data` as text (compact, like Kafka's tool, by default)."""
    separators = (",", ":") if indent is None else (",", ": ")
    return json.dumps(reassignment_data(targets), indent=indent, separators=separators)


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
    named = target.log_dirs is not None and any(d != ANY_LOG_DIR for d in target.log_dirs)
    return _entry(target, "logDirs", named)


def to_manifests(
    targets: Sequence[PartitionTarget], options: ManifestOptions
) -> list[dict[str, Any]]:
    """Build PartitionReassignment objects holding ``targets``, in order.

    Up to :data:`MAX_PARTITIONS_PER_OBJECT` targets give one object named
    ``options.name``; more are cut, in order, into objects of at most that many
    partitions named ``<name>-1``, ``<name>-2``, ... each with the same options.

    Raises:
        ManifestError: No targets, invalid options, or an object the CRD model
            (:class:`~kpo_operator.model.PartitionReassignmentSpec`) refuses.
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
