import pytest

from tunesearch.shapes import DEFAULT_M_BUCKETS, PRESETS, parse_ms, parse_shapes


def test_llama_7b_preset_is_the_five_projections():
    assert parse_shapes("llama-7b") == [(4096, 4096), (4096, 11008), (11008, 4096), (4096, 12288), (4096, 22016)]
    assert set(PRESETS) >= {"llama-7b", "llama-13b", "llama3-8b", "mistral-7b", "llama-70b"}
    assert (4096, 1024) in parse_shapes("llama3-8b")  # grouped k/v


def test_explicit_shapes_and_ms():
    assert parse_shapes("4096x11008, 11008X4096") == [(4096, 11008), (11008, 4096)]
    assert parse_ms(None) == list(DEFAULT_M_BUCKETS) and len(DEFAULT_M_BUCKETS) == 30
    assert parse_ms("16,1,4") == [1, 4, 16]


@pytest.mark.parametrize("bad", ["llama-8b", "4096", "4096x", "12x8", "axb", ""])
def test_bad_shapes_are_rejected(bad):
    with pytest.raises(ValueError, match="shape"):
        parse_shapes(bad)


@pytest.mark.parametrize("bad", ["0", "1,-4", "a,b"])
def test_bad_ms_are_rejected(bad):
    with pytest.raises(ValueError, match="--m"):
        parse_ms(bad)


def test_bucket_edges_are_each_buckets_smallest_m_and_parse_as_edges():
    from tunesearch.shapes import DEFAULT_M_BUCKETS, bucket_edges, parse_ms

    assert bucket_edges([1, 2, 4, 8, 16, 24, 32]) == [3, 5, 9, 17, 25]
    edges = parse_ms("edges")
    assert edges == bucket_edges() and edges[:6] == [3, 5, 9, 17, 25, 33]
    assert not set(edges) & set(DEFAULT_M_BUCKETS)
