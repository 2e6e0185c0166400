"""top_k: the blockwise search against a float64 brute force, with ties, odd sizes and memory maps."""

import warnings

import numpy as np
import pytest
import sklearn
import torch

from sklearn_crocs._search import half_squared_norms, top_k


def _brute_force(queries, database, k):
    """Reference: the full float64 distance matrix, sorted by (distance, index)."""
    queries = np.asarray(queries, dtype=np.float64)
    database = np.asarray(database, dtype=np.float64)
    distances = np.linalg.norm(queries[:, None, :] - database[None, :, :], axis=2)
    index = np.broadcast_to(np.arange(len(database)), distances.shape)
    order = np.lexsort((index, distances), axis=1)[:, :k]
    return np.take_along_axis(distances, order, 1), order


def _assert_same_neighbors(result, reference, rtol=1e-12):
    distances, indices = result
    assert distances.dtype == np.float64
    np.testing.assert_array_equal(indices, reference[1])
    np.testing.assert_allclose(distances, reference[0], rtol=rtol, atol=1e-15)


def _unit_rows(rng, n, d, dtype=np.float32):
    x = rng.standard_normal((n, d)).astype(dtype)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _exact_vectors(n_samples=57):
    """Unit vectors whose products are exact in float32 (multiples of 1/4): many ties."""
    base = np.array(
        [
            [1, 0, 0, 0],
            [0, 1, 0, 0],
            [0, 0, 0, -1],
            [0.5, 0.5, 0.5, 0.5],
            [0.5, -0.5, 0.5, -0.5],
            [-0.5, 0.5, 0.5, 0.5],
        ],
        dtype=np.float32,
    )
    rng = np.random.RandomState(0)
    database = base[rng.randint(len(base), size=n_samples)]
    queries = np.vstack([base, [[0, 0, 1, 0], [-1, 0, 0, 0]]]).astype(np.float32)
    return queries, database


@pytest.mark.parametrize("k", [1, 3, 10, 57, 80])
@pytest.mark.parametrize("block_rows", [1, 4, 13, 57, 16384])
def test_ties_go_to_the_lower_index_whatever_the_blocks(k, block_rows):
    # Groups of equal distances cut by k, within a block and across blocks.
    queries, database = _exact_vectors()
    result = top_k(queries, database, k, block_rows=block_rows)
    _assert_same_neighbors(result, _brute_force(queries, database, k), rtol=0)


@pytest.mark.parametrize("k", [1, 3, 10])
@pytest.mark.parametrize("block_rows", [700, 11000, 16384])
def test_ties_in_blocks_of_many_chunks(k, block_rows):
    # Blocks of few and of many chunks of 64 rows, every chunk maximum tied:
    # the selection among all rows; and a trailing partial chunk.
    queries, database = _exact_vectors(n_samples=12000)
    result = top_k(queries, database, k, block_rows=block_rows)
    _assert_same_neighbors(result, _brute_force(queries, database, k), rtol=0)


@pytest.mark.parametrize("k", [1, 10, 499, 500, 501])
@pytest.mark.parametrize("block_rows", [1, 7, 100, 500, 16384])
def test_random_unit_vectors_match_brute_force(k, block_rows):
    rng = np.random.default_rng(1)
    database, queries = _unit_rows(rng, 500, 16), _unit_rows(rng, 9, 16)
    distances, indices = top_k(queries, database, k, block_rows=block_rows)
    assert distances.shape == indices.shape == (9, min(k, 500))
    _assert_same_neighbors((distances, indices), _brute_force(queries, database, k))


@pytest.mark.parametrize("k", [1, 5, 10])
@pytest.mark.parametrize("block_rows", [11000, 16384])
def test_selection_among_the_chunks_of_largest_maxima(k, block_rows):
    # Distinct scores, blocks of many chunks: the candidates are the rows of
    # the k chunks of largest maxima, plus the block's trailing partial chunk.
    rng = np.random.default_rng(2)
    database, queries = _unit_rows(rng, 12000, 16), _unit_rows(rng, 7, 16)
    queries = np.vstack([queries, database[[10999, 64, 11999]]])  # in tails, at a chunk edge
    result = top_k(queries, database, k, block_rows=block_rows)
    _assert_same_neighbors(result, _brute_force(queries, database, k))


def test_equal_rows_in_chunks_of_different_maxima_go_to_the_lower_index():
    # Row 4000 is the query; an equal pair near it sits in that chunk (row
    # 4001) and in chunk 0 (row 50), whose maximum is lower: the second
    # nearest is row 50.
    rng = np.random.default_rng(3)
    database = _unit_rows(rng, 5000, 16)
    near = database[4000] + 0.05 * rng.standard_normal(16).astype(np.float32)
    database[[50, 4001]] = near / np.linalg.norm(near)
    result = top_k(database[[4000]], database, 2)
    np.testing.assert_array_equal(result[1], [[4000, 50]])
    _assert_same_neighbors(result, _brute_force(database[[4000]], database, 2))


def test_float64_input_gets_float64_distances():
    # Rows are chosen in float32, but the distances come from the float64
    # values themselves: no float32 rounding (about 1e-8) in them.
    rng = np.random.default_rng(2)
    database, queries = _unit_rows(rng, 300, 32, np.float64), _unit_rows(rng, 5, 32, np.float64)
    result = top_k(queries, database, 8, block_rows=64)
    _assert_same_neighbors(result, _brute_force(queries, database, 8), rtol=1e-14)


def test_rows_that_are_not_unit_vectors():
    # An encoder may output zeros, which stay zero when normalised: all at
    # distance 1 of every unit query, equal distances among themselves.
    rng = np.random.default_rng(4)
    database, queries = _unit_rows(rng, 3000, 64), _unit_rows(rng, 6, 64)
    database[::7] = 0.0
    database[3::11] *= 0.5
    reference = _brute_force(queries, database, 25)
    _assert_same_neighbors(top_k(queries, database, 25, block_rows=256), reference)
    assert np.isin(np.arange(0, 3000, 7), reference[1]).any()  # zeros do come up


@pytest.mark.parametrize("n_samples", [0, 1])
def test_empty_and_one_row_databases(n_samples):
    rng = np.random.default_rng(3)
    database, queries = _unit_rows(rng, n_samples, 8), _unit_rows(rng, 4, 8)
    distances, indices = top_k(queries, database, 3)
    assert distances.shape == indices.shape == (4, n_samples)
    _assert_same_neighbors((distances, indices), _brute_force(queries, database, 3))


def test_no_queries_and_k_zero():
    database = _unit_rows(np.random.default_rng(0), 20, 8)
    assert top_k(np.empty((0, 8), np.float32), database, 3)[1].shape == (0, 3)
    assert top_k(database[:2], database, 0)[1].shape == (2, 0)


def test_memmap_is_read_a_block_at_a_time(tmp_path):
    rng = np.random.default_rng(5)
    database = _unit_rows(rng, 300, 8)
    np.save(tmp_path / "embeddings.npy", database)
    memmap = np.load(tmp_path / "embeddings.npy", mmap_mode="r")

    class Reads:
        """The memmap, recording how many rows each read returns."""

        def __init__(self):
            self.sizes = []

        def __len__(self):
            return len(memmap)

        def __getitem__(self, key):
            rows = memmap[key]
            self.sizes.append(len(rows))
            return rows

    queries = database[[5, 17, 250]]
    reads = Reads()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning on read-only arrays
        distances, indices = top_k(queries, reads, 4, block_rows=64)
    assert max(reads.sizes) <= 64
    np.testing.assert_array_equal(indices[:, 0], [5, 17, 250])
    np.testing.assert_array_equal(distances[:, 0], 0.0)  # |q - e| itself, not sqrt(2 - 2 q.e)
    _assert_same_neighbors((distances, indices), _brute_force(queries, database, 4))


def test_thread_settings_are_left_alone():
    rng = np.random.default_rng(6)
    before = torch.get_num_threads(), torch.get_num_interop_threads()
    top_k(_unit_rows(rng, 4, 16), _unit_rows(rng, 1000, 16), 5, block_rows=128)
    assert (torch.get_num_threads(), torch.get_num_interop_threads()) == before


def test_precomputed_half_squared_norms_give_the_same_result():
    # A database searched repeatedly passes its norms once computed: same rows,
    # same distances, whatever the blocks.
    rng = np.random.default_rng(3)
    database = rng.standard_normal((300, 8)).astype(np.float32)
    database[7] = 0.0  # a zero row: its norm matters
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    norms = half_squared_norms(database, block_rows=64)
    np.testing.assert_allclose(norms, -0.5 * (database.astype(np.float64) ** 2).sum(1), rtol=1e-6)
    for block_rows in (64, 1000):
        expected = top_k(queries, database, 10, block_rows=block_rows)
        got = top_k(queries, database, 10, block_rows=block_rows, half_sq_norms=norms)
        np.testing.assert_array_equal(got[1], expected[1])
        np.testing.assert_array_equal(got[0], expected[0])


def test_equal_norms_as_a_float_rank_by_the_products_alone():
    rng = np.random.default_rng(4)
    database = rng.standard_normal((500, 16)).astype(np.float32)
    database /= np.linalg.norm(database, axis=1, keepdims=True)
    queries = rng.standard_normal((6, 16)).astype(np.float32)
    expected = top_k(queries, database, 7, block_rows=128)
    got = top_k(queries, database, 7, block_rows=128, half_sq_norms=-0.5)
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_allclose(got[0], expected[0])


@pytest.mark.parametrize("block_rows", [64, 1000])
def test_queries_are_searched_in_groups_within_working_memory(monkeypatch, block_rows):
    # Each block is compared with as many queries as keep the scores within
    # working_memory (4 queries against 64 rows here): same result as one group.
    import sklearn_crocs._search as search

    rng = np.random.default_rng(5)
    database = _unit_rows(rng, 500, 8)
    queries = _unit_rows(rng, 30, 8)
    widths = []
    largest = search._largest
    monkeypatch.setattr(
        search, "_largest", lambda scores, k: widths.append(scores.shape[1]) or largest(scores, k)
    )
    with sklearn.config_context(working_memory=4 * 4 * 64 / 2**20):
        result = top_k(queries, database, 10, block_rows=block_rows)
    group = 4 if block_rows == 64 else 1  # one block of 500 rows (the database): 1 query
    assert max(widths) == group and sum(widths) == 30 * -(-500 // block_rows)
    _assert_same_neighbors(result, _brute_force(queries, database, 10), rtol=1e-6)
