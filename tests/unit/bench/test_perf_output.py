import pytest

from kpo_bench.perf_output import (
    PerfOutputError,
    parse_consumer_output,
    parse_consumer_performance,
    parse_producer_output,
)

PRODUCER_OUTPUT = """\
98305 records sent, 19661.0 records/sec (19.20 MB/sec), 1200.5 ms avg latency, \
1800.0 ms max latency.
512000 records sent, 21008.403361 records/sec (20.52 MB/sec), 492.60 ms avg latency, \
1031.00 ms max latency, 444 ms 50th, 963 ms 95th, 1015 ms 99th, 1031 ms 99.9th.
"""


def test_producer_summary_is_the_final_line() -> None:
    summary = parse_producer_output(PRODUCER_OUTPUT)
    assert summary.records == 512000
    assert summary.records_per_s == pytest.approx(21008.403361)
    assert summary.avg_latency_ms == pytest.approx(492.6)
    assert summary.max_latency_ms == pytest.approx(1031.0)
    assert summary.p50_ms == 444
    assert summary.p99_ms == 1015
    assert summary.bytes_per_s(1024) == pytest.approx(21008.403361 * 1024)


def test_producer_progress_lines_alone_are_not_a_summary() -> None:
    with pytest.raises(PerfOutputError):
        parse_producer_output(PRODUCER_OUTPUT.splitlines()[0])


def test_consumer_summary() -> None:
    summary = parse_consumer_output("noise\nrecords=51200 bytes=52428800 elapsed_ms=448\n")
    assert (summary.records, summary.bytes, summary.elapsed_ms) == (51200, 52428800, 448)
    assert summary.bytes_per_s == pytest.approx(52428800 * 1000 / 448)


def test_consumer_zero_elapsed_counts_as_one_ms() -> None:
    assert parse_consumer_output("records=1 bytes=10 elapsed_ms=0").bytes_per_s == 10_000.0


def test_consumer_without_summary() -> None:
    with pytest.raises(PerfOutputError):
        parse_consumer_output("timeout after 3 of 10 records")


CONSUMER_PERFORMANCE_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-26 09:53:12:345, 2026-11-26 09:53:29:012, 50.0000, 3.0035, 51200, 3072.0000, \
8887, 7760, 6.4433, 6597.9381
"""


def test_consumer_performance_summary_with_or_without_header() -> None:
    summary = parse_consumer_performance(CONSUMER_PERFORMANCE_OUTPUT)
    assert summary.records == 51200
    assert summary.mib == pytest.approx(50.0)
    assert summary.mib_per_s == pytest.approx(3.0035)
    assert summary.rebalance_ms == 8887 and summary.fetch_ms == 7760
    assert summary.fetch_mib_per_s == pytest.approx(6.4433)
    headless = CONSUMER_PERFORMANCE_OUTPUT.split("\n", 1)[1]
    assert parse_consumer_performance(f"WARN something\n{headless}") == summary
    # Nothing read: Java prints NaN/Infinity rates; still a summary, with 0 records.
    empty = "2026-11-26 09:53:12:345, 2026-11-26 09:54:12:345, 0.0000, 0.0000, 0, 0.0000, \
5356, 55159, 0.0000, NaN\n"
    assert parse_consumer_performance(empty).records == 0
    with pytest.raises(PerfOutputError):
        parse_consumer_performance(CONSUMER_PERFORMANCE_OUTPUT.split("\n", 1)[0])
