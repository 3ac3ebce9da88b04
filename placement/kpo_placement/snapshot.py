"""The snapshot dataset: a directory of Parquet tables plus ``metadata.json`` (format 1).

A snapshot is what the collector writes (live cluster) or ``synthesize`` writes (synthetic
cluster), and what the job reads, so a plan can be recomputed from the same input. The
tables and their units are documented in ``docs/reference/placement-job.md``; the schemas
below are the authority (:data:`SCHEMAS`). Reading checks every file against its schema and a few
invariants, and fails with :class:`SnapshotError` naming the file and the column.

This module is pure data handling with pyarrow (no Kafka, no Spark).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

FORMAT = 1
"""The only snapshot format version, written as ``metadata.json`` ``format``."""
METADATA_FILE = "metadata.json"
"""Name of the metadata file inside a snapshot directory."""


def _field(name: str, type_: pa.DataType, nullable: bool = False) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


BROKERS = pa.schema(
    [
        _field("broker_id", pa.int32()),
        _field("rack", pa.string(), nullable=True),
        _field("alive", pa.bool_()),
        _field("disk_capacity_bytes", pa.int64()),
        _field("net_in_capacity_bytes_per_s", pa.int64()),
        _field("net_out_capacity_bytes_per_s", pa.int64()),
    ]
)
"""``brokers.parquet``: one row per broker (alive or referenced by an assignment)."""

PARTITIONS = pa.schema(
    [
        _field("topic", pa.string()),
        _field("partition", pa.int32()),
        _field("replicas", pa.list_(pa.int32())),
        _field("leader", pa.int32()),
        _field("isr", pa.list_(pa.int32())),
    ]
)
"""``partitions.parquet``: one row per partition (Metadata); ``leader`` -1 = none."""

REPLICAS = pa.schema(
    [
        _field("broker_id", pa.int32()),
        _field("topic", pa.string()),
        _field("partition", pa.int32()),
        _field("log_dir", pa.string()),
        _field("size_bytes", pa.int64()),
    ]
)
"""``replicas.parquet``: one row per replica found on a broker (DescribeLogDirs)."""

LOAD_SAMPLES = pa.schema(
    [
        _field("timestamp_ms", pa.int64()),
        _field("topic", pa.string()),
        _field("partition", pa.int32()),
        _field("bytes_in_per_s", pa.float64()),
        _field("bytes_out_per_s", pa.float64()),
        _field("messages_in_per_s", pa.float64()),
    ]
)
"""``load_samples.parquet``: leader-side rates of one partition over one sampling interval."""

SCHEMAS: dict[str, pa.Schema] = {
    "brokers.parquet": BROKERS,
    "partitions.parquet": PARTITIONS,
    "replicas.parquet": REPLICAS,
    "load_samples.parquet": LOAD_SAMPLES,
}
"""File name -> exact Arrow schema of that table."""


class SnapshotError(ValueError):
    """A snapshot file is missing or does not match its schema or invariants.

    Attributes:
        file: The file name (``brokers.parquet``, ``metadata.json``, ...).
        column: The offending column or metadata key, ``None`` for the file as a whole.
    """

    def __init__(self, file: str, column: str | None, message: str) -> None:
        where = file if column is None else f"{file}: column {column!r}"
        super().__init__(f"{where}: {message}")
        self.file = file
        self.column = column


@dataclass(frozen=True)
class SnapshotMetadata:
    """``metadata.json`` of a snapshot.

    Attributes:
        cluster_id: Kafka's cluster id (DescribeCluster), ``None`` when unknown.
        taken_at_ms: When the snapshot was taken, ms since the Unix epoch.
        source: ``"live"`` (collected from a cluster) or ``"synthetic"``.
        window_s: Length of the load-sampling window, seconds.
        format: Always :data:`FORMAT`.
    """

    cluster_id: str | None
    taken_at_ms: int
    source: Literal["live", "synthetic"]
    window_s: float
    format: int = FORMAT

    def to_json(self) -> dict[str, Any]:
        """Return the JSON object written to ``metadata.json``."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> SnapshotMetadata:
        """Check and convert the decoded ``metadata.json``.

        Raises:
            SnapshotError: A key is missing or has the wrong type or value.
        """

        def bad(key: str | None, message: str) -> SnapshotError:
            return SnapshotError(METADATA_FILE, key, message)

        if not isinstance(data, Mapping):
            raise bad(None, "must be a JSON object")
        for key in ("format", "cluster_id", "taken_at_ms", "source", "window_s"):
            if key not in data:
                raise bad(key, "missing")
        unknown = sorted(set(data) - {"format", "cluster_id", "taken_at_ms", "source", "window_s"})
        if unknown:
            raise bad(unknown[0], "unknown key")
        if data["format"] != FORMAT or isinstance(data["format"], bool):
            raise bad("format", f"unsupported format {data['format']!r} (expected {FORMAT})")
        if data["cluster_id"] is not None and not isinstance(data["cluster_id"], str):
            raise bad("cluster_id", "must be a string or null")
        taken = data["taken_at_ms"]
        if not isinstance(taken, int) or isinstance(taken, bool) or taken < 0:
            raise bad("taken_at_ms", "must be a non-negative integer (ms since the epoch)")
        if data["source"] not in ("live", "synthetic"):
            raise bad("source", f"must be 'live' or 'synthetic', not {data['source']!r}")
        window = data["window_s"]
        if (
            not isinstance(window, int | float)
            or isinstance(window, bool)
            or not math.isfinite(window)
            or window < 0
        ):
            raise bad("window_s", "must be a non-negative number of seconds")
        return cls(data["cluster_id"], taken, data["source"], float(window))


@dataclass(frozen=True)
class Snapshot:
    """The four tables and the metadata of a snapshot (tables match :data:`SCHEMAS`).

    Attributes:
        brokers: :data:`BROKERS` table.
        partitions: :data:`PARTITIONS` table.
        replicas: :data:`REPLICAS` table.
        load_samples: :data:`LOAD_SAMPLES` table.
        metadata: The metadata.
    """

    brokers: pa.Table
    partitions: pa.Table
    replicas: pa.Table
    load_samples: pa.Table
    metadata: SnapshotMetadata

    def tables(self) -> dict[str, pa.Table]:
        """Return file name -> table, in :data:`SCHEMAS` order."""
        return {
            "brokers.parquet": self.brokers,
            "partitions.parquet": self.partitions,
            "replicas.parquet": self.replicas,
            "load_samples.parquet": self.load_samples,
        }


def table_from_rows(file: str, rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Build the table of ``file`` (a key of :data:`SCHEMAS`) from row dicts.

    Raises:
        SnapshotError: A row misses a column or holds a value of the wrong type.
    """
    schema = SCHEMAS[file]
    listed = list(rows)
    columns: dict[str, list[Any]] = {name: [] for name in schema.names}
    for row in listed:
        for name in schema.names:
            if name not in row:
                raise SnapshotError(file, name, "missing in a row")
            columns[name].append(row[name])
    try:
        return pa.Table.from_pydict(columns, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise SnapshotError(file, None, f"cannot build the table: {exc}") from exc


def _check_schema(file: str, table: pa.Table) -> pa.Table:
    """Check column names, order, types and nulls of ``table`` against ``file``'s schema."""
    schema = SCHEMAS[file]
    for name in table.column_names:
        if name not in schema.names:
            raise SnapshotError(file, name, "unexpected column")
    for expected in schema:
        if expected.name not in table.column_names:
            raise SnapshotError(file, expected.name, "missing")
        actual = table.schema.field(expected.name).type
        if not actual.equals(expected.type):
            raise SnapshotError(file, expected.name, f"has type {actual}, expected {expected.type}")
        column = table.column(expected.name)
        if not expected.nullable and column.null_count:
            raise SnapshotError(file, expected.name, f"{column.null_count} null value(s)")
        if pa.types.is_list(expected.type) and pc.list_flatten(column).null_count:
            raise SnapshotError(file, expected.name, "a list holds a null broker id")
    return table.select(schema.names).cast(schema)


def _duplicate(table: pa.Table, keys: Sequence[str]) -> dict[str, Any] | None:
    """Return the key columns of one key that occurs twice, ``None`` if keys are unique."""
    counted = table.group_by(list(keys)).aggregate([([], "count_all")])
    rows: list[dict[str, Any]] = counted.filter(pc.greater(counted["count_all"], 1)).to_pylist()
    return {k: rows[0][k] for k in keys} if rows else None


def _check_non_negative(file: str, table: pa.Table, columns: Sequence[str]) -> None:
    for name in columns:
        values = table.column(name)
        if len(values) == 0:
            continue
        if pa.types.is_floating(values.type) and not pc.all(pc.is_finite(values)).as_py():
            raise SnapshotError(file, name, "holds a NaN or infinite value")
        if pc.min(values).as_py() < 0:
            raise SnapshotError(file, name, "holds a negative value")


def validate_snapshot(snapshot: Snapshot) -> None:
    """Check each table's schema and the invariants between tables.

    Invariants: unique ``broker_id`` in brokers and ``(topic, partition)`` in partitions and
    ``(broker_id, topic, partition)`` in replicas; non-empty replica lists without
    duplicates; ``leader`` is -1 or one of the replicas; every broker id named by the
    partitions exists in brokers; sizes, capacities and rates non-negative and finite.

    Raises:
        SnapshotError: The first problem, naming its file and column.
    """
    tables = {file: _check_schema(file, t) for file, t in snapshot.tables().items()}
    brokers, partitions = tables["brokers.parquet"], tables["partitions.parquet"]
    for file, keys in (
        ("brokers.parquet", ("broker_id",)),
        ("partitions.parquet", ("topic", "partition")),
        ("replicas.parquet", ("broker_id", "topic", "partition")),
    ):
        duplicate = _duplicate(tables[file], keys)
        if duplicate is not None:
            raise SnapshotError(file, ",".join(keys), f"duplicate key {duplicate}")
    _check_non_negative(
        "brokers.parquet", brokers, [n for n in BROKERS.names if n not in ("rack", "alive")]
    )
    _check_non_negative("partitions.parquet", partitions, ["partition"])
    _check_non_negative("replicas.parquet", tables["replicas.parquet"], ["size_bytes"])
    samples = tables["load_samples.parquet"]
    _check_non_negative(
        "load_samples.parquet", samples, [n for n in LOAD_SAMPLES.names if n != "topic"]
    )
    known = set(brokers.column("broker_id").to_pylist())
    for row in partitions.to_pylist():
        name = f"{row['topic']}-{row['partition']}"
        replicas: list[int] = row["replicas"]
        if not replicas:
            raise SnapshotError("partitions.parquet", "replicas", f"{name} has no replica")
        if len(set(replicas)) != len(replicas):
            raise SnapshotError("partitions.parquet", "replicas", f"{name} repeats a broker")
        if row["leader"] != -1 and row["leader"] not in replicas:
            raise SnapshotError("partitions.parquet", "leader", f"{name}: not a replica")
        missing = sorted(set(replicas) - known)
        if missing:
            raise SnapshotError(
                "partitions.parquet", "replicas", f"{name}: broker {missing[0]} not in brokers"
            )


def write_snapshot(directory: Path | str, snapshot: Snapshot) -> list[Path]:
    """Validate ``snapshot`` and write it into ``directory`` (created if needed).

    Returns:
        The paths written: the four Parquet files, then ``metadata.json``.

    Raises:
        SnapshotError: The snapshot is invalid (nothing is written then).
        OSError: The directory cannot be written.
    """
    validate_snapshot(snapshot)
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for file, table in snapshot.tables().items():
        path = root / file
        pq.write_table(table.select(SCHEMAS[file].names).cast(SCHEMAS[file]), path)
        written.append(path)
    meta = root / METADATA_FILE
    meta.write_text(json.dumps(snapshot.metadata.to_json(), indent=2, sort_keys=True) + "\n")
    written.append(meta)
    return written


def read_snapshot(directory: Path | str) -> Snapshot:
    """Read and validate the snapshot in ``directory``.

    Raises:
        SnapshotError: A file is missing, unreadable, or does not match its schema or the
            invariants of :func:`validate_snapshot`; the error names the file and column.
    """
    root = Path(directory)
    tables: dict[str, pa.Table] = {}
    for file in SCHEMAS:
        path = root / file
        if not path.is_file():
            raise SnapshotError(file, None, f"missing in {root}")
        try:
            tables[file] = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise SnapshotError(file, None, f"not a readable Parquet file: {exc}") from exc
    meta_path = root / METADATA_FILE
    if not meta_path.is_file():
        raise SnapshotError(METADATA_FILE, None, f"missing in {root}")
    try:
        decoded = json.loads(meta_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SnapshotError(METADATA_FILE, None, f"not valid JSON: {exc}") from exc
    snapshot = Snapshot(
        brokers=_check_schema("brokers.parquet", tables["brokers.parquet"]),
        partitions=_check_schema("partitions.parquet", tables["partitions.parquet"]),
        replicas=_check_schema("replicas.parquet", tables["replicas.parquet"]),
        load_samples=_check_schema("load_samples.parquet", tables["load_samples.parquet"]),
        metadata=SnapshotMetadata.from_json(decoded),
    )
    validate_snapshot(snapshot)
    return snapshot
