import json

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


def _config(tmp_path, name="config.json", **fields):
    path = tmp_path / name
    path.write_text(json.dumps(fields))
    return path


LLAMA_7B = dict(hidden_size=4096, intermediate_size=11008, num_attention_heads=32)


def test_a_models_config_gives_the_presets_shapes(tmp_path):
    assert parse_shapes(str(_config(tmp_path, **LLAMA_7B))) == PRESETS["llama-7b"]
    assert parse_shapes(str(tmp_path)) == PRESETS["llama-7b"]  # the folder holding config.json
    llama3 = _config(tmp_path, "l3.json", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                     num_key_value_heads=8, model_type="llama")
    assert parse_shapes(str(llama3)) == PRESETS["llama3-8b"]


def test_a_config_whose_heads_do_not_span_the_hidden_size(tmp_path):
    # heads x head_dim = 4096 on a hidden size of 2048 (as Qwen3's small models): q and o differ
    path = _config(tmp_path, hidden_size=2048, intermediate_size=6144, num_attention_heads=32,
                   num_key_value_heads=8, head_dim=128)
    # q, o, k/v, gate/up, down, fused gate+up; fused qkv (4096 + 2 x 1024 columns) is gate/up's shape
    assert parse_shapes(str(path)) == [(2048, 4096), (4096, 2048), (2048, 1024), (2048, 6144), (6144, 2048),
                                       (2048, 12288)]


def test_a_multimodal_configs_text_model(tmp_path):
    path = _config(tmp_path, model_type="llava", text_config=LLAMA_7B, vision_config={"hidden_size": 1024})
    assert parse_shapes(str(path)) == PRESETS["llama-7b"]


@pytest.mark.parametrize("fields, message", [
    (dict(hidden_size=4096, num_attention_heads=32), "intermediate_size"),
    (dict(LLAMA_7B, hidden_size="4096"), "hidden_size"),
    (dict(LLAMA_7B, num_key_value_heads=-8), "positive"),
    (dict(LLAMA_7B, num_attention_heads=5, head_dim=3), "15x4096 from .*multiple of 8"),  # o's K: 5 x 3
])
def test_a_bad_config_names_what_it_lacks(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        parse_shapes(str(_config(tmp_path, **fields)))


def test_an_unreadable_config_is_named(tmp_path):
    with pytest.raises(ValueError, match="missing.json"):
        parse_shapes(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{hidden_size: 4096")
    with pytest.raises(ValueError, match="bad.json"):
        parse_shapes(str(bad))


@pytest.mark.parametrize("command", ["sweep", "bench"])
def test_the_cli_reads_a_config_or_names_it(tmp_path, command):
    from typer.testing import CliRunner

    from tunesearch.cli import app

    store = ["--db", f"sqlite:///{tmp_path}/s.db"] if command == "sweep" else []
    r = CliRunner().invoke(app, [command, "--shapes", str(tmp_path / "nope.json"), *store], env={"COLUMNS": "300"})
    assert r.exit_code == 2 and "nope.json" in r.output, r.output  # before the missing GPU (exit 1)
