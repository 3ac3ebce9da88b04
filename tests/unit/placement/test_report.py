"""The plan report: numbers, table text and the PNG chart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from kpo_placement.model import ClusterModel
from kpo_placement.report import WaveSummary, build_report, human_bytes, render_report, save_chart

GIB = 1 << 30


def two_broker_model() -> ClusterModel:
    """Brokers 10 and 20 (racks a, b) plus an empty broker 30; two partitions on 10 only."""
    return ClusterModel(
        broker_ids=np.array([10, 20, 30], dtype=np.int32),
        racks=np.array([0, 1, -1], dtype=np.int32),
        rack_names=["a", "b"],
        alive=np.array([True, True, True]),
        disk_capacity=np.full(3, 10.0 * GIB),
        net_in_capacity=np.full(3, 100e6),
        net_out_capacity=np.full(3, 100e6),
        topics=np.array(["t", "t"], dtype=object),
        partitions=np.array([0, 1], dtype=np.int32),
        replicas=np.array([[0], [0]], dtype=np.int32),
        leaders=np.array([0, 0], dtype=np.int32),
        size_bytes=np.array([2.0 * GIB, 1.0 * GIB]),
        bytes_in=np.array([4e6, 2e6]),
        bytes_out=np.array([8e6, 0.0]),
    )


def test_report_numbers_before_and_after() -> None:
    model = two_broker_model()
    target = np.array([[1], [2]], dtype=np.int32)  # one partition each to 20 and 30
    waves = [WaveSummary(1, 2, 3 * GIB, 30.0)]
    report = build_report(model, target, waves=waves)
    assert report.before[:, 0].tolist() == [3.0 * GIB, 0.0, 0.0]
    assert report.after[:, 0].tolist() == [0.0, 2.0 * GIB, 1.0 * GIB]
    assert report.before[:, 4].tolist() == [2, 0, 0]  # leaders
    assert report.bytes_moved == 3.0 * GIB
    assert 0 < report.lower_bound <= report.bytes_moved
    assert report.imbalance_before["disk"] == pytest.approx(3.0)  # all on one of three
    assert report.imbalance_after["disk"] == pytest.approx(2.0)
    assert report.racks == ["a", "b", "-"]


def test_rendered_tables_name_brokers_goals_and_the_bound() -> None:
    model = two_broker_model()
    target = np.array([[1], [2]], dtype=np.int32)
    report = build_report(model, target, removed=[10], waves=[WaveSummary(1, 2, 3 * GIB, None)])
    text = render_report(report)
    assert "Load per broker (before -> after)" in text
    assert "10 (out)" in text  # broker 10 is being removed
    assert "3.00 -> 0.00 (0%)" in text  # disk GiB of broker 10
    assert "0.00 -> 2.00 (20%)" in text  # disk GiB of broker 20
    for goal in ("disk balance (max/mean)", "leaders balance (max/mean)", "ineligible-broker"):
        assert goal in text
    ineligible = next(line for line in text.splitlines() if "ineligible-broker" in line)
    assert [c.strip() for c in ineligible.split("│")[1:-1]] == [
        "ineligible-broker",
        "hard (broken)",
        "1",
        "0",
    ]
    assert "wave 1" in text and "unthrottled" in text
    assert "total moved" in text and "3.00 GiB" in text
    assert "lower bound (tolerance 1.05)" in text and "moved/bound" in text


def test_chart_is_a_png_with_one_panel_per_resource(tmp_path: Path) -> None:
    model = two_broker_model()
    report = build_report(model, np.array([[1], [2]], dtype=np.int32))
    path = save_chart(report, tmp_path / "out" / "chart.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(path)
    assert pixels.shape[0] == 400 and pixels.shape[1] == 2000  # 20 x 4 inches at 100 dpi
    assert len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 2  # bars were drawn


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(1536) == "1.50 KiB"
    assert human_bytes(3 * GIB) == "3.00 GiB"
