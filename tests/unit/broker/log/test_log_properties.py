"""Property test: any sequence of appended batches reads back byte-identical."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kpo_broker.log.config import LogConfig
from kpo_broker.log.log import Log
from kpo_broker.log.records import assign_offsets
from tests.unit.broker.log.batches import make_batch

NOW_MS = 1_700_000_000_000

batch_specs = st.lists(
    st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=5), min_size=1, max_size=25
)


@settings(max_examples=40, deadline=None)
@given(
    specs=batch_specs,
    segment_bytes=st.integers(min_value=200, max_value=3000),
    index_interval=st.integers(min_value=0, max_value=500),
    data=st.data(),
)
def test_appended_batches_read_back_identically(
    specs: list[list[bytes]], segment_bytes: int, index_interval: int, data: st.DataObject
) -> None:
    config = LogConfig(
        segment_bytes=segment_bytes, index_interval_bytes=index_interval, file_delete_delay_ms=0
    )
    expected: list[tuple[int, int, bytes]] = []  # (base offset, last offset, bytes)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "prop-0"
        log = Log.open(directory, config, now_ms=NOW_MS)
        for i, values in enumerate(specs):
            batch = make_batch(values, timestamp_ms=1000 + i)
            info = log.append_as_leader(batch, leader_epoch=0, now_ms=NOW_MS)
            assigned, _ = assign_offsets(batch, info.first_offset, 0)
            expected.append((info.first_offset, info.last_offset, assigned))
        leo = log.log_end_offset
        assert leo == sum(len(v) for v in specs)

        def check(current: Log) -> None:
            start = data.draw(st.integers(min_value=0, max_value=leo))
            wanted = b"".join(raw for _b, last, raw in expected if last >= start)
            assert current.read(start, 10**9).to_bytes() == wanted
            budget = data.draw(st.integers(min_value=0, max_value=2000))
            got = current.read(start, budget).to_bytes()
            assert wanted.startswith(got)
            assert len(got) <= budget or got == next(
                raw for _b, last, raw in expected if last >= start
            )

        check(log)
        log.close()
        reopened = Log.open(directory, config, recovery_point=0, now_ms=NOW_MS)
        assert reopened.log_end_offset == leo
        check(reopened)
        reopened.close()


@settings(max_examples=30, deadline=None)
@given(
    specs=batch_specs,
    segment_bytes=st.integers(min_value=200, max_value=2000),
    data=st.data(),
)
def test_truncation_keeps_exactly_the_batches_before_the_cut(
    specs: list[list[bytes]], segment_bytes: int, data: st.DataObject
) -> None:
    config = LogConfig(
        segment_bytes=segment_bytes, index_interval_bytes=100, file_delete_delay_ms=0
    )
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "trunc-0"
        log = Log.open(directory, config, now_ms=NOW_MS)
        expected: list[tuple[int, int, bytes]] = []
        for values in specs:
            batch = make_batch(values)
            info = log.append_as_leader(batch, leader_epoch=len(expected) // 3, now_ms=NOW_MS)
            assigned, _ = assign_offsets(batch, info.first_offset, len(expected) // 3)
            expected.append((info.first_offset, info.last_offset, assigned))
        cut = data.draw(st.integers(min_value=0, max_value=log.log_end_offset))
        kept = [(base, last, raw) for base, last, raw in expected if last < cut]
        log.truncate_to(cut)
        new_leo = kept[-1][1] + 1 if kept else 0
        assert log.log_end_offset == new_leo
        assert log.read(0, 10**9).to_bytes() == b"".join(raw for *_x, raw in kept)
        assert all(entry.start_offset < new_leo for entry in log.leader_epoch_cache.entries)
        log.close()
        reopened = Log.open(directory, config, now_ms=NOW_MS)
        assert reopened.log_end_offset == new_leo
        assert reopened.read(0, 10**9).to_bytes() == b"".join(raw for *_x, raw in kept)
        reopened.close()
