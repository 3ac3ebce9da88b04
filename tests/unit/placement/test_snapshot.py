"""Snapshot dataset: round trip, schema checks naming file and column, invariants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kpo_placement.snapshot import (
    SCHEMAS,
    Snapshot,
    SnapshotError,
    SnapshotMetadata,
    read_snapshot,
    table_from_rows,
    write_snapshot,
)


def brokers(**overrides: Any) -> list[dict[str, Any]]:
    rows = [
        {
            "broker_id": b,
            "rack": f"r{b}" if b < 2 else None,
            "alive": b != 2,
            "disk_capacity_bytes": 1000,
            "net_in_capacity_bytes_per_s": 100,
            "net_out_capacity_bytes_per_s": 200,
        }
        for b in range(3)
    ]
    rows[0].update(overrides)
    return rows


def small_snapshot(**partition_overrides: Any) -> Snapshot:
    partitions = [
        {"topic": "a", "partition": 0, "replicas": [0, 1], "leader": 0, "isr": [0, 1]},
        {"topic": "a", "partition": 1, "replicas": [1, 2], "leader": -1, "isr": []},
    ]
    partitions[0].update(partition_overrides)
    replicas = [
        {"broker_id": 0, "topic": "a", "partition": 0, "log_dir": "/d", "size_bytes": 10},
        {"broker_id": 1, "topic": "a", "partition": 0, "log_dir": "/d", "size_bytes": 9},
        {"broker_id": 1, "topic": "a", "partition": 1, "log_dir": "/d", "size_bytes": 3},
    ]
    samples = [
        {
            "timestamp_ms": 1000 * i,
            "topic": "a",
            "partition": 0,
            "bytes_in_per_s": 1.5 * i,
            "bytes_out_per_s": 2.0,
            "messages_in_per_s": 0.5,
        }
        for i in range(1, 4)
    ]
    return Snapshot(
        brokers=table_from_rows("brokers.parquet", brokers()),
        partitions=table_from_rows("partitions.parquet", partitions),
        replicas=table_from_rows("replicas.parquet", replicas),
        load_samples=table_from_rows("load_samples.parquet", samples),
        metadata=SnapshotMetadata("cluster-x", 123, "live", 3.0),
    )


def test_round_trip_keeps_every_table_and_the_metadata(tmp_path: Path) -> None:
    snapshot = small_snapshot()
    written = write_snapshot(tmp_path, snapshot)
    assert [p.name for p in written] == [*SCHEMAS, "metadata.json"]
    back = read_snapshot(tmp_path)
    for name, table in snapshot.tables().items():
        assert back.tables()[name].equals(table), name
        assert back.tables()[name].schema.equals(SCHEMAS[name])
    assert back.metadata == snapshot.metadata
    assert json.loads((tmp_path / "metadata.json").read_text()) == {
        "format": 1,
        "cluster_id": "cluster-x",
        "taken_at_ms": 123,
        "source": "live",
        "window_s": 3.0,
    }
    assert back.brokers.column("rack").to_pylist() == ["r0", "r1", None]


def test_parquet_files_have_the_documented_arrow_types(tmp_path: Path) -> None:
    write_snapshot(tmp_path, small_snapshot())
    schema = pq.read_schema(tmp_path / "partitions.parquet")
    assert schema.field("replicas").type.equals(pa.list_(pa.int32()))
    assert schema.field("partition").type == pa.int32()
    assert pq.read_schema(tmp_path / "replicas.parquet").field("size_bytes").type == pa.int64()


def rewrite(path: Path, change: Any) -> None:
    pq.write_table(change(pq.read_table(path)), path)


@pytest.mark.parametrize(
    ("file", "change", "column", "message"),
    [
        (
            "partitions.parquet",
            lambda t: t.set_column(1, "partition", t.column("partition").cast(pa.int64())),
            "partition",
            "has type int64, expected int32",
        ),
        (
            "brokers.parquet",
            lambda t: t.drop_columns(["alive"]),
            "alive",
            "missing",
        ),
        (
            "load_samples.parquet",
            lambda t: t.append_column("cpu", pa.array([0.0] * t.num_rows)),
            "cpu",
            "unexpected column",
        ),
        (
            "replicas.parquet",
            lambda t: t.set_column(
                4, pa.field("size_bytes", pa.int64()), pa.array([1, None, 3], pa.int64())
            ),
            "size_bytes",
            r"1 null value\(s\)",
        ),
        (
            "replicas.parquet",
            lambda t: t.set_column(4, "size_bytes", pa.array([1, -5, 3], pa.int64())),
            "size_bytes",
            "negative",
        ),
        (
            "load_samples.parquet",
            lambda t: t.set_column(
                3, "bytes_in_per_s", pa.array([1.0, float("nan"), 2.0], pa.float64())
            ),
            "bytes_in_per_s",
            "NaN",
        ),
    ],
)
def test_read_names_the_file_and_column_of_a_schema_error(
    tmp_path: Path, file: str, change: Any, column: str, message: str
) -> None:
    write_snapshot(tmp_path, small_snapshot())
    rewrite(tmp_path / file, change)
    with pytest.raises(SnapshotError, match=message) as caught:
        read_snapshot(tmp_path)
    assert (caught.value.file, caught.value.column) == (file, column)
    assert file in str(caught.value) and repr(column) in str(caught.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    write_snapshot(tmp_path, small_snapshot())
    (tmp_path / "replicas.parquet").unlink()
    with pytest.raises(SnapshotError, match=r"replicas.parquet: missing") as caught:
        read_snapshot(tmp_path)
    assert caught.value.column is None


def test_a_file_that_is_not_parquet_is_named(tmp_path: Path) -> None:
    write_snapshot(tmp_path, small_snapshot())
    (tmp_path / "brokers.parquet").write_text("not parquet")
    with pytest.raises(SnapshotError, match=r"brokers\.parquet: not a readable Parquet file"):
        read_snapshot(tmp_path)


@pytest.mark.parametrize(
    ("content", "key", "message"),
    [
        ({"format": 2}, "format", "unsupported format 2"),
        ({"source": "guess"}, "source", "must be 'live' or 'synthetic'"),
        ({"window_s": -1}, "window_s", "non-negative"),
        ({"taken_at_ms": "now"}, "taken_at_ms", "integer"),
        ({"extra": 1}, "extra", "unknown key"),
    ],
)
def test_metadata_errors_name_the_key(
    tmp_path: Path, content: dict[str, Any], key: str, message: str
) -> None:
    write_snapshot(tmp_path, small_snapshot())
    meta = json.loads((tmp_path / "metadata.json").read_text())
    meta.update(content)
    (tmp_path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(SnapshotError, match=message) as caught:
        read_snapshot(tmp_path)
    assert (caught.value.file, caught.value.column) == ("metadata.json", key)


def test_metadata_missing_key_and_bad_json(tmp_path: Path) -> None:
    write_snapshot(tmp_path, small_snapshot())
    (tmp_path / "metadata.json").write_text('{"format": 1}')
    with pytest.raises(SnapshotError, match="'cluster_id': missing"):
        read_snapshot(tmp_path)
    (tmp_path / "metadata.json").write_text("{")
    with pytest.raises(SnapshotError, match=r"metadata\.json: not valid JSON"):
        read_snapshot(tmp_path)


@pytest.mark.parametrize(
    ("overrides", "column", "message"),
    [
        ({"replicas": [0, 0]}, "replicas", "a-0 repeats a broker"),
        ({"replicas": []}, "replicas", "a-0 has no replica"),
        ({"leader": 2}, "leader", "a-0: not a replica"),
        ({"replicas": [0, 7]}, "replicas", "broker 7 not in brokers"),
        ({"partition": 1}, "topic,partition", "duplicate key"),
    ],
)
def test_invariants_are_checked_on_write(
    tmp_path: Path, overrides: dict[str, Any], column: str, message: str
) -> None:
    with pytest.raises(SnapshotError, match=message) as caught:
        write_snapshot(tmp_path / "out", small_snapshot(**overrides))
    assert (caught.value.file, caught.value.column) == ("partitions.parquet", column)
    assert not (tmp_path / "out").exists()


def test_duplicate_broker_is_refused() -> None:
    snapshot = small_snapshot()
    rows = [*brokers(), brokers()[0]]
    bad = Snapshot(
        table_from_rows("brokers.parquet", rows),
        snapshot.partitions,
        snapshot.replicas,
        snapshot.load_samples,
        snapshot.metadata,
    )
    with pytest.raises(SnapshotError, match=r"brokers.parquet: column 'broker_id': duplicate"):
        write_snapshot("/nonexistent-never-written", bad)


def test_table_from_rows_names_a_missing_column_and_bad_values() -> None:
    with pytest.raises(SnapshotError, match="column 'isr': missing in a row"):
        table_from_rows(
            "partitions.parquet", [{"topic": "a", "partition": 0, "replicas": [0], "leader": 0}]
        )
    with pytest.raises(SnapshotError, match=r"brokers\.parquet: cannot build the table"):
        table_from_rows("brokers.parquet", brokers(broker_id="zero"))
