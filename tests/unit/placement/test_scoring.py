import numpy as np
import pytest

from kpo_placement.scoring import NumpyScorer, RoundProblem, penalty, penalty_scalar


def problem(**changes):
    """One candidate leaving broker 0, four possible destinations (1..3 and 0 itself)."""
    b = 4
    util = np.array([[1.2] * 5, [0.9] * 5, [0.8] * 5, [0.8] * 5])
    base = dict(
        source=np.array([0], dtype=np.int32),
        load=np.array([[10.0, 1.0, 0.0, 1.0, 0.0]]),
        others=np.array([[3]], dtype=np.int32),
        others_rack=np.array([[1]], dtype=np.int32),
        need_new_rack=np.array([False]),
        topic_row=np.array([0], dtype=np.int32),
        required=np.array([False]),
        source_hinge=np.array([0.05]),
        source_score=np.array([0.05]),
        dest_ok=np.ones(b, dtype=bool),
        dest_rack=np.array([0, 1, 0, 1], dtype=np.int32),
        dest_util=util,
        dest_pen=penalty(util, 1.05, 0.95),
        dest_scale=np.full((b, 5), 0.01),
        disk_room=np.full(b, 100.0),
        slot_room=np.full(b, 5, dtype=np.int32),
        topic_full=np.zeros((1, b), dtype=bool),
        weights=np.array([1.0, 1.0, 0.0, 1.0, 0.0]),
        upper=1.05,
        lower=0.95,
        topic_weight=0.001,
        top_k=4,
    )
    base.update(changes)
    return RoundProblem(**base)


def test_penalty_is_zero_inside_the_band_and_grows_outside():
    v = np.array([0.9, 0.95, 1.0, 1.05, 1.15])
    assert penalty(v, 1.05, 0.95).tolist() == pytest.approx([0.05 * 1.05, 0, 0, 0, 0.1 * 1.1])
    assert penalty_scalar(1.15, 1.05, 0.95) == pytest.approx(0.1 * 1.1)


def test_best_destinations_by_score_ties_to_the_lower_position():
    best = NumpyScorer().best_moves(problem())
    # broker 0 is the source, broker 3 already holds the partition; 2 (0.8) gains most:
    # it leaves the band's bottom; 1 is inside the band
    assert best.dest[0].tolist()[:2] == [2, 1]
    assert best.dest[0].tolist()[2:] == [-1, -1]
    assert np.isnan(best.score[0, 2])
    util = np.array([[1.2] * 5, [0.8] * 5, [0.8] * 5, [0.8] * 5])
    tie = NumpyScorer().best_moves(problem(dest_util=util, dest_pen=penalty(util, 1.05, 0.95)))
    assert tie.dest[0].tolist()[:2] == [1, 2]
    assert tie.score[0, 0] == tie.score[0, 1]


def test_hinge_is_source_gain_plus_destination_gain():
    best = NumpyScorer().best_moves(problem())
    # to broker 1 (0.9 -> 0.9 + 0.1 / 0.01 each on disk, net in, count):
    after = np.array([0.9 + 0.1, 0.9 + 0.01, 0.9 + 0.01])
    expected = 0.05 + sum(penalty(np.array(0.9), 1.05, 0.95) - penalty(after, 1.05, 0.95))
    assert best.hinge[0, 1] == pytest.approx(expected)


def test_rack_disk_and_slot_filters():
    best = NumpyScorer().best_moves(problem(need_new_rack=np.array([True])))
    assert best.dest[0].tolist()[:1] == [2]  # broker 1 shares rack 1 with broker 3
    full_disk = NumpyScorer().best_moves(problem(disk_room=np.array([100.0, 100.0, 5.0, 100.0])))
    assert full_disk.dest[0].tolist()[:1] == [1]
    no_slot = NumpyScorer().best_moves(problem(slot_room=np.array([5, 0, 5, 5], dtype=np.int32)))
    assert no_slot.dest[0].tolist()[:1] == [2]
    closed = NumpyScorer().best_moves(problem(dest_ok=np.array([True, False, False, True])))
    assert closed.dest[0].tolist() == [-1, -1, -1, -1]


def test_topic_penalty_reorders_destinations():
    full = np.array([[False, False, True, False]])
    best = NumpyScorer().best_moves(problem(topic_full=full, topic_weight=1.0))
    assert best.dest[0].tolist()[:2] == [1, 2]


def test_non_improving_pairs_are_dropped_unless_required():
    util = np.array([[1.0] * 5, [1.0] * 5, [1.0] * 5, [1.0] * 5])
    quiet = dict(
        dest_util=util,
        dest_pen=penalty(util, 1.05, 0.95),
        source_hinge=np.array([0.0]),
        source_score=np.array([0.0]),
        load=np.array([[1000.0, 1.0, 0.0, 1.0, 0.0]]),
        disk_room=np.full(4, 1e9),
    )
    assert NumpyScorer().best_moves(problem(**quiet)).dest[0, 0] == -1
    forced = NumpyScorer().best_moves(problem(required=np.array([True]), **quiet))
    assert forced.dest[0].tolist()[:2] == [1, 2]
    assert forced.hinge[0, 0] < 0


def test_chunks_give_the_same_answer():
    n = 7
    many = problem(
        source=np.zeros(n, dtype=np.int32),
        load=np.tile(np.array([[10.0, 1.0, 0.0, 1.0, 0.0]]), (n, 1)) * np.arange(1, n + 1)[:, None],
        others=np.full((n, 1), 3, dtype=np.int32),
        others_rack=np.ones((n, 1), dtype=np.int32),
        need_new_rack=np.zeros(n, dtype=bool),
        topic_row=np.zeros(n, dtype=np.int32),
        required=np.zeros(n, dtype=bool),
        source_hinge=np.full(n, 0.05),
        source_score=np.full(n, 0.05),
        top_k=2,
    )
    whole = NumpyScorer().best_moves(many)
    chunked = NumpyScorer(max_cells=8).best_moves(many)
    assert np.array_equal(whole.dest, chunked.dest)
    assert np.array_equal(whole.score, chunked.score, equal_nan=True)
    assert whole.dest.shape == (n, 2)


def test_smallest_k_equals_a_stable_full_sort_ties_included():
    from kpo_placement.scoring import _smallest_k

    rng = np.random.default_rng(17)
    values = rng.integers(0, 5, size=(200, 40)).astype(float)  # many ties
    values[rng.random(values.shape) < 0.3] = np.inf  # infeasible pairs
    for k in (1, 3, 16, 40):
        expected = np.argsort(values, axis=1, kind="stable")[:, :k]
        assert np.array_equal(_smallest_k(values, k), expected)


def test_chunk_size_does_not_change_the_answer():
    util = np.array([[1.2] * 5, [0.9] * 5, [0.8] * 5, [0.8] * 5])
    many = problem(
        source=np.zeros(5, dtype=np.int32),
        load=np.array([[10.0, 1.0, 0.0, 1.0, 0.0]] * 5) * np.arange(1, 6)[:, None],
        others=np.full((5, 1), 3, dtype=np.int32),
        others_rack=np.ones((5, 1), dtype=np.int32),
        need_new_rack=np.zeros(5, dtype=bool),
        topic_row=np.zeros(5, dtype=np.int32),
        required=np.array([False, True, False, True, False]),
        source_hinge=np.full(5, 0.05),
        source_score=np.full(5, 0.05),
        dest_util=util,
        dest_pen=penalty(util, 1.05, 0.95),
    )
    whole = NumpyScorer().best_moves(many)
    for cells in (1, 4, 8):
        part = NumpyScorer(max_cells=cells).best_moves(many)
        assert np.array_equal(part.dest, whole.dest)
        assert np.array_equal(part.score, whole.score, equal_nan=True)
        assert np.array_equal(part.hinge, whole.hinge, equal_nan=True)
