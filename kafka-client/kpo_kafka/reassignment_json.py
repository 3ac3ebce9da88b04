"""Read and write Kafka's partition reassignment JSON (pure, no I/O).

Kafka's ``kafka-reassign-partitions`` tool reads and writes a JSON document,
version 1 (``kafka-reassign-partitions --reassignment-json-file``)::

    {"version": 1,
     "partitions": [{"topic": "test", "partition": 2, "replicas": [2, 1],
                     "log_dirs": ["any", "any"]}]}

``--generate`` prints two such documents under the headers ``Current partition
replica assignment`` and ``Proposed partition reassignment configuration``;
:func:`parse_reassignment_json` accepts either a bare document or that whole
output (it then reads the proposed one). Its checks follow
``ReassignPartitionsCommand.executeAssignment`` (version 1 only, no empty or
duplicated partition list, no empty or duplicated replica list, one log dir per
replica; a missing ``version`` means 1) plus the CRD's bounds, and it refuses
unknown fields, which Kafka ignores, so that a misspelt ``log_dirs`` is not lost.
Each entry becomes a :class:`~kpo_kafka.specs.PartitionTarget`; the manifests that
carry them are built in :mod:`kpo_kafka.manifests`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from kpo_kafka.specs import ANY_LOG_DIR, PartitionTarget
from kpo_kafka.topic_partition import TopicPartition

KAFKA_JSON_VERSION = 1
"""The only reassignment JSON version Kafka defines."""

PROPOSED_HEADER = "Proposed partition reassignment configuration"
"""The header under which ``kafka-reassign-partitions --generate`` prints its proposal."""

_INT32_MAX = 2**31 - 1
_MAX_REPLICAS = 32  # the CRD's maxItems for replicas and logDirs
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
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
        One :class:`~kpo_kafka.specs.PartitionTarget` per entry; ``log_dirs`` is kept
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
