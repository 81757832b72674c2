"""store -> export -> load -> lookup, on CPU (no GPU needed)."""
import json
import logging

import pytest
import torch

from tunesearch import load_dispatch
from tunesearch.db import Store, Trial
from tunesearch.dispatch import DispatchError
from tunesearch.export import SCHEMA, export
from tunesearch.variants import Variant, dequantize, matmul, quantize_pack, reference_matmul, variant_error

GPU = "interpreter-test"
BUCKETS = {1: "gemv.bm1.bn64.bk64.sk2.w4.s1", 4: "gemv.bm4.bn64.bk64.sk1.w4.s1",
           16: "splitk.bm16.bn32.bk32.sk2.w4.s2", 64: "gemm.bm64.bn64.bk64.g1.w4.s2"}


def add(store, m, n, k, vid, us, g=64, layout="base"):
    v = Variant.from_id(vid)
    store.add_trial(Trial(gpu_id=1, gpu_name=GPU, m=m, n=n, k=k, group_size=g, layout=layout,
                          variant_id=vid, family=v.family, params=v.params, code_version="c0",
                          status="ok", us=us, roofline_frac=0.5, speedup_fp16=2.0,
                          versions={"triton": "3.6.0", "torch": "x"}))


@pytest.fixture
def table(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/d.db")
    store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0,
                          driver="none", torch_version="x", triton_version="3.6.0",
                          datasheet_bandwidth=None), 1e9)
    for m, vid in BUCKETS.items():
        add(store, m, 72, 256, vid, 10.0)
        add(store, m, 72, 256, "gemm.bm16.bn32.bk32.g1.w4.s2" if m <= 16 else "gemm.bm64.bn32.bk32.g1.w4.s2", 50.0)
    add(store, 1, 40, 128, "gemv.bm1.bn64.bk32.sk4.w4.s1", 3.0)
    path = tmp_path / "dispatch.json"
    export(store, path)
    return path


def test_export_writes_the_best_per_bucket(table):
    data = json.loads(table.read_text())
    assert data["schema"] == SCHEMA
    shape = data["gpus"][GPU]["shapes"]["256x72"]
    assert [b["m_max"] for b in shape["buckets"]] == [1, 4, 16, 64]
    assert [b["variant"]["id"] for b in shape["buckets"]] == list(BUCKETS.values())
    assert data["gpus"][GPU]["versions"]["triton"] == "3.6.0"
    assert {b["code"] for b in shape["buckets"]} == {"c0"}  # each bucket says which kernel code it timed
    assert not list(table.parent.glob(".dispatch.json.*"))  # no temporary file left


@pytest.mark.parametrize("m, expected", [(1, 1), (2, 4), (4, 4), (5, 16), (16, 16), (17, 64), (64, 64), (500, 64)])
def test_bucket_is_smallest_m_max_at_least_m(table, m, expected, kernel_device):
    mm = load_dispatch(table, group_size=64)
    variant = mm.resolve(m, 72, 256, torch.device(kernel_device if kernel_device == "cpu" else "cuda"))
    if kernel_device == "cpu":
        want = Variant.from_id(BUCKETS[expected])
        if variant_error(want, m, 72, 256, 64) is None:
            assert variant == want


def test_dispatch_runs_and_matches_reference(table, kernel_device):
    if kernel_device != "cpu":
        pytest.skip("the interpreter table's GPU name is not this GPU")
    mm = load_dispatch(table, group_size=64)
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    for m in (1, 3, 16, 40):
        a = torch.randn(m, 256).half()
        ref = a.float() @ dequantize(packed, scales, 64).float()
        for out in (mm(a, packed, scales), mm.op(a, packed, scales)):
            assert out.shape == (m, 72)
            assert (out.float() - ref).abs().max() / ref.abs().max() < 2e-3


def test_the_activations_get_their_gradient_through_the_dequantized_weights(table, kernel_device):
    if kernel_device != "cpu":
        pytest.skip("the interpreter table's GPU name is not this GPU")
    mm = load_dispatch(table, group_size=64)
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    w = dequantize(packed, scales, 64).float()
    # aot_eager traces the backward with fake tensors, as torch.compile's default backend does
    compiled = torch.compile(lambda a, packed, scales: mm.op(a, packed, scales), fullgraph=True, backend="aot_eager")
    for call in (mm, mm.op, compiled):
        a = torch.randn(3, 256).half().requires_grad_()
        grad = torch.randn(3, 72).half()
        call(a, packed, scales).backward(grad)
        want = grad.float() @ w.t()  # dA = dC · Wᵀ
        assert a.grad.dtype == torch.float16 and a.grad.shape == a.shape
        assert (a.grad.float() - want).abs().max() / want.abs().max() < 2e-3
        with torch.no_grad():  # inference records nothing
            assert call(a, packed, scales).grad_fn is None


def test_unknown_shape_uses_nearest_valid_or_heuristic_and_logs_once(table, kernel_device, caplog):
    if kernel_device != "cpu":
        pytest.skip("interpreter table")
    mm = load_dispatch(table, group_size=64)
    with caplog.at_level(logging.INFO, logger="tunesearch"):
        v1 = mm.resolve(1, 80, 256, torch.device("cpu"))
        v2 = mm.resolve(1, 80, 256, torch.device("cpu"))
    assert v1 == v2 == Variant.from_id(BUCKETS[1])  # nearest shape's pick is valid here
    assert sum("untuned" in r.message for r in caplog.records) == 1
    v = mm.resolve(1, 72, 192, torch.device("cpu"))  # K=192: no stored pick divides it
    assert v is not None and variant_error(v, 1, 72, 192, 64) is None


def test_strict_mode_raises_on_unknown_shape(table, kernel_device):
    if kernel_device != "cpu":
        pytest.skip("interpreter table")
    mm = load_dispatch(table, group_size=64, strict=True)
    with pytest.raises(DispatchError, match="not in the table"):
        mm.resolve(1, 80, 256, torch.device("cpu"))


def test_cpu_tensors_without_interpreter_fall_back_to_reference(table, monkeypatch, caplog):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    mm = load_dispatch(table, group_size=64)
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    a = torch.randn(2, 256).half()
    with caplog.at_level(logging.WARNING, logger="tunesearch"):
        out = mm(a, packed, scales)
        mm(a, packed, scales)
    assert torch.equal(out, reference_matmul(a, packed, scales, 64))
    assert sum("falling back" in r.message for r in caplog.records) == 1
    strict = load_dispatch(table, group_size=64, strict=True)
    with pytest.raises(DispatchError, match="cpu"):
        strict(a, packed, scales)


def test_bad_inputs_are_rejected_before_dispatch(table):
    mm = load_dispatch(table, group_size=64)
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    with pytest.raises(ValueError, match="float16"):
        mm(torch.randn(2, 256), packed, scales)
    with pytest.raises(ValueError, match="K=128"):
        mm(torch.randn(2, 128).half(), packed, scales)


def write(tmp_path, text):
    p = tmp_path / "bad.json"
    p.write_text(text)
    return p


def test_bad_files_get_clear_errors(tmp_path, table):
    with pytest.raises(DispatchError, match="does not exist"):
        load_dispatch(tmp_path / "missing.json")
    with pytest.raises(DispatchError, match="not valid JSON"):
        load_dispatch(write(tmp_path, "{nope"))
    with pytest.raises(DispatchError, match="schema"):
        load_dispatch(write(tmp_path, json.dumps({"schema": "tunesearch.dispatch/9", "gpus": {}})))
    data = json.loads(table.read_text())
    data["gpus"][GPU]["shapes"]["256x72"]["buckets"][0]["variant"]["id"] = "gemv.warp9"
    with pytest.raises(DispatchError, match="unknown variant id|does not match"):
        load_dispatch(write(tmp_path, json.dumps(data)), group_size=64)
    data = json.loads(table.read_text())
    data["gpus"][GPU]["shapes"]["256x72"]["buckets"][0]["variant"]["family"] = "exec"
    with pytest.raises(DispatchError, match="unknown kernel family"):
        load_dispatch(write(tmp_path, json.dumps(data)), group_size=64)
    with pytest.raises(DispatchError, match="group size 64"):
        load_dispatch(table, group_size=128)


def test_export_merge_keeps_other_shapes(tmp_path, table):
    store = Store(f"sqlite:///{tmp_path}/other.db")
    add(store, 1, 24, 512, "gemv.bm1.bn64.bk64.sk2.w4.s1", 1.0)
    export(store, table, merge=True)
    shapes = json.loads(table.read_text())["gpus"][GPU]["shapes"]
    assert set(shapes) == {"256x72", "128x40", "512x24"}
    with pytest.raises(ValueError, match="no successful trials"):
        export(Store(f"sqlite:///{tmp_path}/empty.db"), tmp_path / "e.json")
    with pytest.raises(ValueError, match=f"for GPU 'H100' \\(it holds '{GPU}'\\)"):  # a typo's fix in sight
        export(store, tmp_path / "e.json", gpu="H100")


def test_a_gluon_pick_on_a_device_without_gluon_takes_a_valid_variant(tmp_path, kernel_device, monkeypatch):
    """A table tuned on an H200 may pick the Gluon family; here (the interpreter) it cannot run, so the
    runtime takes the nearest shape's or the heuristic's variant and the result is still right."""
    if kernel_device != "cpu":
        pytest.skip("interpreter table")
    store = Store(f"sqlite:///{tmp_path}/g.db")
    store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0, driver="none",
                          torch_version="x", triton_version="3.6.0", datasheet_bandwidth=None), 1e9)
    add(store, 64, 72, 256, "dqmma.bm64.bn64.bk64.sk1.w4.s4", 5.0)
    path = tmp_path / "dispatch.json"
    export(store, path)
    assert "dqmma" in path.read_text()
    mm = load_dispatch(path, group_size=64)
    variant = mm.resolve(64, 72, 256, torch.device("cpu"))
    assert variant is not None and variant.family != "dqmma"
    assert variant_error(variant, 64, 72, 256, 64) is None
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    a = torch.randn(64, 256).half()
    ref = a.float() @ dequantize(packed, scales, 64).float()
    assert (mm(a, packed, scales).float() - ref).abs().max() / ref.abs().max() < 2e-3
    with pytest.raises(ValueError, match="needs an sm_90 GPU"):
        matmul(a, packed, scales, Variant.from_id("dqmma.bm64.bn64.bk64.sk1.w4.s4"), 64)
    # where the device has Gluon (as an H200 does), the runtime keeps the table's pick: it asks the
    # device, not the defaults
    from tunesearch.variants import DeviceLimits

    real_of = DeviceLimits.of
    monkeypatch.setattr(DeviceLimits, "of", classmethod(
        lambda cls, device=None: real_of(device) if device is None or isinstance(device, cls) else cls(gluon=True)))
    assert load_dispatch(path, group_size=64).resolve(64, 72, 256, torch.device("cpu")).family == "dqmma"


def test_a_gpu_no_table_was_swept_on_runs_the_nearest_gpus_table(monkeypatch, caplog):
    # by compute capability, then SM count, then the start of the name: an H200 NVL runs the H200's picks
    # and an H100 PCIe the H100 SXM's, each with a warning; a GPU two capabilities away runs none
    from types import SimpleNamespace

    from tunesearch.dispatch import Dispatcher, packaged_tables

    packaged = packaged_tables()
    assert sorted(packaged["gpus"]) == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
    lesser = json.loads(json.dumps(packaged["gpus"]["NVIDIA H100 80GB HBM3"]))
    lesser.update(name="GPU of 114 SMs", sm_count=114)
    tables = {"gpus": {**packaged["gpus"], "GPU of 114 SMs": lesser}}
    for name, sms, cap, picked in [("NVIDIA H200", 132, (9, 0), "NVIDIA H200"),
                                   ("NVIDIA H200 NVL", 132, (9, 0), "NVIDIA H200"),
                                   ("NVIDIA H100 80GB HBM3", 132, (9, 0), "NVIDIA H100 80GB HBM3"),
                                   ("NVIDIA H100 NVL", 132, (9, 0), "NVIDIA H100 80GB HBM3"),
                                   ("NVIDIA H100 PCIe", 114, (9, 0), "GPU of 114 SMs"),
                                   ("NVIDIA A100-SXM4-80GB", 108, (8, 0), "GPU of 114 SMs"),
                                   ("Tesla V100-SXM2-32GB", 80, (7, 0), None)]:
        props = SimpleNamespace(name=name, major=cap[0], minor=cap[1], multi_processor_count=sms)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index, p=props: p)
        with caplog.at_level(logging.WARNING, logger="tunesearch"):
            caplog.clear()
            table = Dispatcher(tables).table_for(torch.device("cuda", 0))
        assert (table.name if table else None) == picked, name
        assert ("no table for" in caplog.text) == (picked is not None and picked != name), name


def test_packaged_tables_were_timed_with_this_trees_kernels():
    # Each bucket records the kernel code its trial was timed with (search.family_code: the family's own
    # sources' hash, or the Triton families'). A kernel source edited after the sweep (a docstring too:
    # the hash is of the bytes) would ship timings of other code as this code's, and `export
    # --current-code-only` would drop those buckets: re-sweep the family, or leave its sources as they were.
    from tunesearch.dispatch import packaged_tables
    from tunesearch.search import code_version, family_code

    stale = [(gpu, shape, b["m_max"], b["variant"]["id"], b["code"])
             for gpu, entry in packaged_tables()["gpus"].items()
             for shape, table in entry["shapes"].items() for b in table["buckets"]
             if b["code"] != family_code(b["variant"]["family"], code_version(), table.get("layout", "base"))]
    assert not stale, stale[:5]


def test_every_packaged_bucket_with_a_timed_smallest_m_is_picked_over_it():
    # A bucket whose smallest M the table times but whose pick was not timed there is picked at its largest
    # M alone, and the runtime weighs no split inside it (4096^2 bucket 1280 in _s53's table: the
    # dequantize route, untimed at 1025, ran M=1100 whole at 63.4 us, two launches 57.5; NOTES.md row 106)
    from tunesearch.dispatch import packaged_tables
    from tunesearch.export import unweighed_buckets

    assert unweighed_buckets(packaged_tables()) == []


def test_unweighed_buckets_names_each_pick_untimed_at_its_buckets_smallest_m():
    from tunesearch.export import unweighed_buckets

    route, tile = "dequant.bk32.bn128.w4", "rsmma.bm128.bn64.bk128.sk1.w4.s3.c2"
    table = {"gpus": {GPU: {"shapes": {"4096x4096": {"buckets": [
        _bucket(1024, tile, 46.7), _bucket(1025, tile, 65.0), _bucket(1280, route, 69.4),
        _bucket(1281, route, 70.3), _bucket(1536, tile, 76.0, (1281, 73.3)), _bucket(2048, tile, 91.2)]}}}}}
    # bucket 1280 has its edge key and no edge time; 1536 has both; 2048 has no edge key (nothing to weigh)
    assert unweighed_buckets(table) == [
        f"{GPU} 4096x4096 M=1025..1280: no dequant variant timed at both M, so the bucket is picked at "
        "M=1280 alone (sweep --shapes 4096x4096 --m 1025 --families dequant --more 4)"]


# -- weight layouts ------------------------------------------------------------------------------

def test_a_layout_left_out_of_the_comparison_is_named():
    # choose_layout compares only layouts timed at every M bucket: one that a cut-short sweep left without
    # some buckets is not compared at all, so the export names it (the CLI prints it as a warning)
    import json
    from pathlib import Path

    from tunesearch.export import uncompared_layouts

    table = {"gpus": {"H": {"shapes": {"4096x22016": {
        "layout": "base", "buckets": [{"m_max": m} for m in (1, 48, 64, 4096)],
        "other_layouts": {"frag32": {"1": 16.4, "4096": 979.9}}}}}}}
    assert uncompared_layouts(table) == [
        "H 4096x22016: frag32 lacks M=48,64, so the shape keeps base without comparing it"]
    table["gpus"]["H"]["shapes"]["4096x22016"]["other_layouts"]["frag32"].update({"48": 31.7, "64": 26.4})
    assert uncompared_layouts(table) == []
    packaged = json.loads((Path(__file__).resolve().parents[1] / "tunesearch/tables/h200.json").read_text())
    assert uncompared_layouts(packaged) == []  # every shape's layouts were compared at all 30 buckets


def test_a_shape_keeps_the_layout_with_the_lowest_geometric_mean_over_every_m():
    from tunesearch.export import choose_layout

    # 10% faster at M=1 outweighs 5% slower at M=4096, though the latter is far more microseconds
    assert choose_layout({"base": {1: 10.0, 4096: 1000.0}, "frag32": {1: 9.0, 4096: 1050.0}}) == "frag32"
    assert choose_layout({"base": {1: 10.0, 4096: 1000.0}, "frag32": {1: 9.9, 4096: 1050.0}}) == "base"
    # a layout missing an M bucket cannot serve the shape; a tie keeps base
    assert choose_layout({"base": {1: 10.0, 64: 30.0}, "frag32": {1: 5.0}}) == "base"
    assert choose_layout({"base": {1: 10.0}, "frag32": {1: 10.0}}) == "base"
    assert choose_layout({"frag32": {1: 10.0}}) == "frag32"


@pytest.fixture
def frag32_table(tmp_path):
    """256x72 timed in both layouts, faster in frag32 (dequant reads it: it runs in the interpreter);
    128x40 in base only."""
    store = Store(f"sqlite:///{tmp_path}/d.db")
    store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0,
                          driver="none", torch_version="x", triton_version="3.6.0",
                          datasheet_bandwidth=None), 1e9)
    for m, base_vid, us in ((1, "gemv.bm1.bn64.bk64.sk2.w4.s1", 10.0), (64, "dequant.bk64.bn64.w4", 30.0)):
        add(store, m, 72, 256, base_vid, us)
        add(store, m, 72, 256, "dequant.bk32.bn64.w4", us * 0.9, layout="frag32")
    add(store, 1, 40, 128, "gemv.bm1.bn64.bk32.sk4.w4.s1", 3.0)
    path = tmp_path / "dispatch.json"
    export(store, path)
    return path


def test_export_keeps_one_layout_a_shape_and_says_what_it_was_chosen_against(frag32_table):
    shapes = json.loads(frag32_table.read_text())["gpus"][GPU]["shapes"]
    assert shapes["256x72"]["layout"] == "frag32"
    assert [b["variant"]["id"] for b in shapes["256x72"]["buckets"]] == ["dequant.bk32.bn64.w4"] * 2
    assert shapes["256x72"]["other_layouts"] == {"base": {"1": 10.0, "64": 30.0}}
    assert shapes["128x40"]["layout"] == "base" and "other_layouts" not in shapes["128x40"]


def test_prepare_stores_weights_in_the_tables_layout_and_both_layouts_compute_the_product(
        frag32_table, kernel_device, caplog):
    from tunesearch.variants.layout import layout_of

    if kernel_device != "cpu":
        pytest.skip("the interpreter table's GPU name is not this GPU")
    mm = load_dispatch(frag32_table, group_size=64)
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    prepared = mm.prepare(packed, scales)
    assert prepared.shape == (256 // 32, 4 * 72) and layout_of(prepared, scales) == "frag32"
    assert mm.prepare(prepared, scales) is prepared  # already there
    other, other_scales = quantize_pack(torch.randn(128, 40), 64)
    assert mm.prepare(other, other_scales) is other  # a base-layout shape stays as it is
    a = torch.randn(3, 256).half()
    ref = a.float() @ dequantize(packed, scales, 64).float()
    assert mm.resolve(3, 72, 256, a.device, "frag32") == Variant.from_id("dequant.bk32.bn64.w4")
    assert mm.resolve(3, 72, 256, a.device) == mm.resolve(3, 72, 256, a.device, "frag32")  # the table's own
    with pytest.raises(DispatchError, match="mm.prepare"):  # strict: no silent fallback for base weights
        load_dispatch(frag32_table, group_size=64, strict=True)(a, packed, scales)
    for out in (mm(a, prepared, scales), mm.op(a, prepared, scales)):
        assert out.shape == (3, 72) and (out.float() - ref).abs().max() / ref.abs().max() < 2e-3
    with caplog.at_level(logging.WARNING, logger="tunesearch"):  # base weights: still right, and told once
        for _ in range(2):
            out = mm(a, packed, scales)
            assert (out.float() - ref).abs().max() / ref.abs().max() < 2e-3
            mm(torch.randn(5, 256).half(), packed, scales)
    assert sum("mm.prepare" in r.getMessage() for r in caplog.records) == 1


def test_tables_of_the_first_schema_are_read_as_base_layout(tmp_path, table):
    data = json.loads(table.read_text())
    data["schema"] = "tunesearch.dispatch/1"
    for shape in data["gpus"][GPU]["shapes"].values():
        del shape["layout"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    mm = load_dispatch(old, group_size=64)
    assert mm.layout_for(72, 256, torch.device("cpu")) == "base"
    bad = json.loads(table.read_text())
    bad["gpus"][GPU]["shapes"]["256x72"]["layout"] = "k16"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(DispatchError, match="unknown layout 'k16'"):
        load_dispatch(tmp_path / "bad.json", group_size=64)


def _edge_store(tmp_path, with_edge: bool):
    """Bucket 48 on one shape: A fastest at M=48 but slow at its smallest M (33), B a little slower at 48 and
    fast at 33, C timed at 48 only; the buckets 16, 32 (and 17, the edge of 32, with B alone)."""
    store = Store(f"sqlite:///{tmp_path}/e{int(with_edge)}.db")
    store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0,
                          driver="none", torch_version="x", triton_version="3.6.0",
                          datasheet_bandwidth=None), 1e9)
    a, b, c = "gemm.bm64.bn64.bk64.g1.w4.s2", "gemm.bm16.bn64.bk64.g1.w4.s2", "gemm.bm32.bn64.bk64.g1.w4.s2"
    for vid, us in ((a, 10.0), (b, 10.5), (c, 10.2)):
        add(store, 48, 72, 256, vid, us)
    for m in (16, 32):
        add(store, m, 72, 256, b, 5.0)
    if with_edge:
        add(store, 33, 72, 256, a, 20.0)
        add(store, 33, 72, 256, b, 11.0)
        add(store, 33, 72, 256, "gemm.bm32.bn32.bk32.g1.w4.s2", 10.8)  # the fastest at 33, not timed at 48
        add(store, 17, 72, 256, b, 6.0)  # bucket 32's edge: timed, but nothing else at 32 to choose from
    return store


def test_export_picks_for_the_whole_bucket_where_its_smallest_m_is_timed(tmp_path):
    from tunesearch.export import build_table

    plain = build_table(_edge_store(tmp_path, False))["gpus"][GPU]["shapes"]["256x72"]["buckets"]
    assert [(b["m_max"], b["variant"]["id"]) for b in plain] == [
        (16, "gemm.bm16.bn64.bk64.g1.w4.s2"), (32, "gemm.bm16.bn64.bk64.g1.w4.s2"),
        (48, "gemm.bm64.bn64.bk64.g1.w4.s2")]
    assert not any("edge" in b for b in plain)
    table = build_table(_edge_store(tmp_path, True))
    buckets = {b["m_max"]: b for b in table["gpus"][GPU]["shapes"]["256x72"]["buckets"]}
    assert sorted(buckets) == [16, 17, 32, 33, 48]  # the edges are buckets of their own, of one M
    # A: 1.0x the fastest at 48, 20 / 10.8 = 1.85x at 33; B: 1.05x and 1.02x. C was not timed at 33.
    assert buckets[48]["variant"]["id"] == "gemm.bm16.bn64.bk64.g1.w4.s2" and buckets[48]["us"] == 10.5
    assert buckets[48]["edge"] == {"m": 33, "us": 11.0}
    assert buckets[32]["edge"] == {"m": 17, "us": 6.0}
    assert buckets[33]["variant"]["id"] == "gemm.bm32.bn32.bk32.g1.w4.s2" and "edge" not in buckets[33]
    assert "edge" not in buckets[16] and "edge" not in buckets[17]


def test_an_edge_timed_without_the_buckets_fastest_family_does_not_pick_for_it(tmp_path):
    from tunesearch.export import build_table

    store = _edge_store(tmp_path, False)
    route = "dequant.bk32.bn128.w4"  # another family, timed at 48 and at its smallest M alone
    add(store, 48, 72, 256, route, 30.0)
    add(store, 33, 72, 256, route, 12.0)
    buckets = {b["m_max"]: b for b in build_table(store)["gpus"][GPU]["shapes"]["256x72"]["buckets"]}
    assert buckets[48]["variant"]["id"] == "gemm.bm64.bn64.bk64.g1.w4.s2" and "edge" not in buckets[48]
    # tunesearch export names the bucket, with the sweep that fills its edge
    from typer.testing import CliRunner

    from tunesearch.cli import app

    r = CliRunner().invoke(app, ["export", str(tmp_path / "t.json"), "--db", store.url], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert "256x72 M=33..48: no gemm variant timed at both M" in r.output
    assert "--m 33 --families gemm --more 4" in r.output
    add(store, 33, 72, 256, "gemm.bm16.bn64.bk64.g1.w4.s2", 11.0)  # the family timed there: picked for it
    buckets = {b["m_max"]: b for b in build_table(store)["gpus"][GPU]["shapes"]["256x72"]["buckets"]}
    assert buckets[48]["variant"]["id"] == "gemm.bm16.bn64.bk64.g1.w4.s2" and buckets[48]["edge"]["m"] == 33
    r = CliRunner().invoke(app, ["export", str(tmp_path / "t.json"), "--db", store.url], env={"COLUMNS": "300"})
    assert r.exit_code == 0 and "no gemm variant" not in r.output, r.output


def test_bucket_edge_is_a_key_one_past_the_key_below():
    from tunesearch.shapes import bucket_edge

    ms = [1, 2, 4, 5, 8, 16, 17, 24, 32]
    assert [bucket_edge(ms, i) for i in range(len(ms))] == [None, None, None, None, 5, None, None, 17, None]
    # 2 is one past 1 but bucket 4's smallest M is 3; 24's edge 17 holds: 24 - 17 >= 2; 5 is a bucket of one M
    assert bucket_edge([1, 2, 3, 4], 3) is None  # 4 - 3 < 2: bucket 4 holds only 4


def test_edge_keys_are_one_past_a_key_that_is_not_one():
    from tunesearch.shapes import edge_keys, is_edge_key

    # 3 is bucket 4's smallest M although 4 - 3 < 2 leaves bucket 4 no edge to pick for (the layout check
    # must still leave 3 out); 4 is one past 3 but a bucket; 5 is one past the bucket 4
    assert edge_keys([1, 2, 3, 4, 5, 8, 9, 16, 17, 24, 25, 32]) == {3, 5, 9, 17, 25}
    assert edge_keys([1, 2, 4, 8]) == set()
    assert is_edge_key(3, [1, 2, 4]) and is_edge_key(5, [1, 2, 3, 4]) and not is_edge_key(4, [1, 2, 3])


def test_keys_at_bucket_edges_stay_out_of_the_layout_choice(tmp_path):
    """Edges swept in one layout only (``--m edges --layouts frag32``) leave the other layout timed at every
    bucket: it is still compared (here it wins) and the export warns of nothing."""
    from tunesearch.export import build_table, uncompared_layouts

    store = Store(f"sqlite:///{tmp_path}/l.db")
    store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0,
                          driver="none", torch_version="x", triton_version="3.6.0",
                          datasheet_bandwidth=None), 1e9)
    for layout, ms, us in (("frag32", (16, 32, 33, 48), 10.0), ("base", (16, 32, 48), 9.0)):
        for m in ms:
            add(store, m, 72, 256, "dequant.bk32.bn64.w4", us, layout=layout)
    table = build_table(store)
    assert table["gpus"][GPU]["shapes"]["256x72"]["layout"] == "base"
    assert uncompared_layouts(table) == []


def test_a_key_at_bucket_4s_smallest_m_stays_out_of_the_layout_check(tmp_path):
    """M=3 swept in one layout beside buckets 2 and 4 (``--m edges`` on the default buckets): bucket 4 then
    holds only 4, but 3 is still an edge, not a bucket the other layout lacks (the `_s41` re-sweep warned
    "base lacks M=3")."""
    from tunesearch.export import build_table, uncompared_layouts

    store = Store(f"sqlite:///{tmp_path}/l.db")
    store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0,
                          driver="none", torch_version="x", triton_version="3.6.0",
                          datasheet_bandwidth=None), 1e9)
    for layout, ms, us in (("frag32", (1, 2, 3, 4, 8), 10.0), ("base", (1, 2, 4, 8), 9.0)):
        for m in ms:
            add(store, m, 72, 256, "dequant.bk32.bn64.w4", us, layout=layout)
    table = build_table(store)
    assert table["gpus"][GPU]["shapes"]["256x72"]["layout"] == "base"
    assert uncompared_layouts(table) == []


def _bucket(m, vid, us, edge=None):
    """A table bucket: its largest M, pick, time there, and (edge) the pick's time at its smallest M."""
    return {"m_max": m, "variant": Variant.from_id(vid).to_dict(), "us": us,
            **({"edge": {"m": edge[0], "us": edge[1]}} if edge else {})}


def _split_table(edge_m=17, edge_us=20.0, bucket_us=9.0):
    """Buckets 1 (3 us), 16 (5 us), 17 (an edge key, 20 us) and 32 (9 us, ``edge_us`` at ``edge_m``) on 256x72:
    M=17 costs 20 us whole, 5 + 3 as M=16 and M=1; M=18..32 at least min(edge_us, bucket_us) whole."""
    buckets = [_bucket(1, BUCKETS[1], 3.0), _bucket(16, BUCKETS[16], 5.0), _bucket(17, BUCKETS[64], 20.0),
               _bucket(32, BUCKETS[64], bucket_us, (edge_m, edge_us))]
    return {"schema": SCHEMA, "gpus": {GPU: {"name": GPU, "capability": "0.0", "versions": {}, "shapes": {
        "256x72": {"n": 72, "k": 256, "group_size": 64, "layout": "base", "buckets": buckets}}}}}


def test_m_just_past_a_bucket_runs_as_two_launches_where_the_table_says_they_are_faster():
    from tunesearch.dispatch import _ShapeTable

    shape = lambda table: next(iter(table["gpus"][GPU]["shapes"].values()))  # noqa: E731
    plain = _ShapeTable(shape(_split_table())["buckets"], 64, "t")
    # M=17: its own bucket's 20 us against 5 + 3; M=18..32: 9 us at least against 5 + 5 (r <= 16), and
    # 5 + 20 at r = 17 is not taken either; the buckets themselves and M past the largest: one launch
    assert plain.launches(17) == (16, 1)
    assert [plain.launches(m) for m in (1, 2, 16, 18, 24, 32, 33, 100)] == [(m,) for m in (1, 2, 16, 18, 24, 32, 33,
                                                                                         100)]
    # the bucket's pick slow at both ends (20 us): M=18..32 as 16 + the rest, the rest's bucket time counted
    slow = _ShapeTable(shape(_split_table(bucket_us=30.0))["buckets"], 64, "t")
    assert [slow.launches(m) for m in (17, 18, 32)] == [(16, 1), (16, 2), (16, 16)]
    # 0.98 of the whole's time is the bar: 5 + 5 = 10 against 0.98 * 10.2 = 9.996 stays whole, against
    # 0.98 * 10.25 = 10.045 splits
    assert _ShapeTable(shape(_split_table(edge_us=10.2, bucket_us=30))["buckets"], 64, "t").launches(20) == (20,)
    assert _ShapeTable(shape(_split_table(edge_us=10.25, bucket_us=30))["buckets"], 64, "t").launches(20) == (16, 4)
    # an edge that is not one past the bucket below says nothing about M=18..32
    assert _ShapeTable(shape(_split_table(edge_m=20, bucket_us=30))["buckets"], 64, "t").launches(24) == (24,)


def test_a_split_takes_whichever_full_bucket_below_makes_the_two_launches_fastest():
    from tunesearch.dispatch import _ShapeTable

    # bucket 24's pick is as slow as 32's (tiles that fit 24 rows no better than 32), so M=28 runs as
    # 16 + 12 (5 + 5 us), not as 24 + 4 (30 + 5) nor 1 + 27 (3 + 30), against 30 us whole
    shape = _ShapeTable([_bucket(1, BUCKETS[1], 3.0), _bucket(16, BUCKETS[16], 5.0),
                         _bucket(24, BUCKETS[64], 30.0), _bucket(25, BUCKETS[64], 30.0),
                         _bucket(32, BUCKETS[64], 30.0, (25, 30.0))], 64, "t")
    assert shape.launches(28) == (16, 12) and shape.launches(32) == (16, 16)
    # M=20, in bucket 24 (no edge stored): no split
    assert shape.launches(20) == (20,)
    # the table's time for a plan: each launch's bucket time, summed
    assert (shape.table_us(28, (16, 12)), shape.table_us(28, (24, 4)), shape.table_us(20)) == (10.0, 35.0, 30.0)
    assert shape.table_us(500) == 30.0  # past the largest bucket: its time there, the least M can take


def test_at_a_buckets_own_largest_m_a_split_weighs_the_picks_time_there():
    from tunesearch.dispatch import _ShapeTable

    # bucket 32's pick: 9 us at M=17 (its edge), 11 at M=32. Inside the bucket the whole launch is taken
    # to cost the lesser end, 9, and 16 + 16 (10 us) stays whole; at M=32 itself the table holds 11, so
    # 10 < 0.98 * 11 splits. Without an edge stored, M=32 is still known: the same
    buckets = [_bucket(1, BUCKETS[1], 3.0), _bucket(16, BUCKETS[16], 5.0), _bucket(17, BUCKETS[64], 20.0)]
    with_edge = _ShapeTable(buckets + [_bucket(32, BUCKETS[64], 11.0, (17, 9.0))], 64, "t")
    assert [with_edge.launches(m) for m in (24, 31, 32)] == [(24,), (31,), (16, 16)]
    no_edge = _ShapeTable(buckets + [_bucket(32, BUCKETS[64], 11.0)], 64, "t")
    assert [no_edge.launches(m) for m in (24, 31, 32)] == [(24,), (31,), (16, 16)]
    # at 10.1 us the bucket's own time is within the bar (0.98 * 10.1 = 9.898 < 10): whole
    assert _ShapeTable(buckets + [_bucket(32, BUCKETS[64], 10.1)], 64, "t").launches(32) == (32,)


def test_a_whole_launch_costs_what_the_bucket_end_with_as_many_token_tiles_costs():
    from tunesearch.dispatch import _ShapeTable

    # bucket 1024's pick has 128-token tiles: 5 rows of them at its edge M=513 (60 us), 8 at 1024 (90 us)
    bm128 = "rsmma.bm128.bn64.bk128.sk1.w4.s3.c2"
    shape = _ShapeTable([_bucket(1, BUCKETS[1], 3.0), _bucket(512, bm128, 40.0), _bucket(513, bm128, 60.0),
                         _bucket(1024, bm128, 90.0, (513, 60.0))], 64, "t")
    # as many tiles as an end: that end's time; between: the line between them, in tiles (6 of 5..8)
    assert [shape.whole_us(m) for m in (513, 600, 640, 700, 897, 1000, 1024)] == [60.0, 60.0, 60.0, 70.0, 90.0,
                                                                                 90.0, 90.0]
    # M=1000 whole is 90 us, not the lesser end's 60: 512 + 488 (40 + 40) is under 0.98 * 90, so it splits;
    # M=600 takes 60 whole, under 80
    assert (shape.launches(1000), shape.launches(600)) == ((512, 488), (600,))
    # the bench's "table us" beside each: the plan's prediction (past the largest bucket, its time there)
    assert (shape.table_us(1000, (512, 488)), shape.table_us(700), shape.table_us(600), shape.table_us(5000)) == \
        (80.0, 70.0, 60.0, 90.0)
    # a pick whose tiles say nothing (not a token-tiled family): the lesser end anywhere inside the bucket
    gemm = _ShapeTable([_bucket(1, BUCKETS[1], 3.0), _bucket(512, BUCKETS[64], 40.0), _bucket(513, BUCKETS[64], 60.0),
                        _bucket(1024, BUCKETS[64], 90.0, (513, 60.0))], 64, "t")
    assert [gemm.whole_us(m) for m in (513, 700, 1000, 1024)] == [60.0, 60.0, 60.0, 90.0]
    assert gemm.launches(1000) == (1000,)


def test_the_cublas_routes_whole_launch_costs_the_line_between_its_ends_in_m():
    from tunesearch.dispatch import _ShapeTable

    # bucket 1280 picks dequantize-then-cuBLAS: 58 us at its edge M=1025, 69 at 1280. cuBLAS's time grows
    # with M, so M=1100 is taken at 58 + 11 * 75/255, not the lesser end 58 (4096^2, NOTES.md row 106)
    route = "dequant.bk32.bn128.w4"
    below = [_bucket(1, BUCKETS[1], 7.0), _bucket(96, BUCKETS[64], 11.0), _bucket(1024, BUCKETS[64], 46.7)]
    shape = _ShapeTable(below + [_bucket(1280, route, 69.0, (1025, 58.0))], 64, "t")
    assert [round(shape.whole_us(m), 3) for m in (1025, 1100, 1280)] == [58.0, round(58 + 11 * 75 / 255, 3), 69.0]
    # so 1024 + 76 (46.7 + 11 = 57.7 us) splits at M=1100 against 0.98 * 61.24; at M=1040, 0.98 * 58.65
    # = 57.47 stays whole
    assert (shape.launches(1100), shape.launches(1040)) == ((1024, 76), (1040,))
    # with no edge stored the line has no ends: whole, as before
    no_edge = _ShapeTable(below + [_bucket(1280, route, 69.0)], 64, "t")
    assert no_edge.launches(1100) == (1100,)


def test_a_split_call_matches_the_reference_and_the_two_launches_apart(kernel_device):
    from tunesearch.dispatch import Dispatcher

    if kernel_device != "cpu":
        pytest.skip("the interpreter table's GPU name is not this GPU")
    table = _split_table(bucket_us=30.0)
    mm, whole = Dispatcher(table, group_size=64), Dispatcher(table, group_size=64, split=False)
    device = torch.device("cpu")
    assert [(rows, v.id) for rows, v in mm.plan(17, 72, 256, device)] == [(16, BUCKETS[16]), (1, BUCKETS[1])]
    assert [(rows, v.id) for rows, v in mm.plan(24, 72, 256, device)] == [(16, BUCKETS[16]), (8, BUCKETS[16])]
    assert [(rows, v.id) for rows, v in whole.plan(17, 72, 256, device)] == [(17, BUCKETS[64])]
    assert [rows for rows, _ in mm.plan(16, 72, 256, device)] == [16]
    # what the bench shows beside the measured time: 5 + 3 (M=17 as 16 + 1), 5 + 5, and 20 (bucket 17 whole)
    assert (mm.table_us(17, 72, 256, device), mm.table_us(24, 72, 256, device)) == (8.0, 10.0)
    assert whole.table_us(17, 72, 256, device) == 20.0 and mm.table_us(17, 40, 256, device) is None  # untuned
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    for m in (17, 24):
        a = torch.randn(m, 256).half()
        out = mm(a, packed, scales)
        ref = a.float() @ dequantize(packed, scales, 64).float()
        assert out.shape == (m, 72) and (out.float() - ref).abs().max() / ref.abs().max() < 2e-3
        apart = torch.cat([mm(a[:16], packed, scales), mm(a[16:], packed, scales)])
        assert torch.equal(out, apart)  # the same two kernels on the same rows, into one output
        assert torch.equal(mm(a, packed, scales), out)  # the cached launcher: the same again



def _three_launch_table(bucket32_us=30.0):
    """``_split_table(bucket_us=bucket32_us)`` and two buckets more, 33 (an edge key, 35 us) and 64 (60 us, 35
    at its edge M=33): M=34 costs 35 us whole, 16 + 16 + 2 (5 + 5 + 5) in three launches."""
    table = _split_table(bucket_us=bucket32_us)
    table["gpus"][GPU]["shapes"]["256x72"]["buckets"] += [_bucket(33, BUCKETS[64], 35.0),
                                                          _bucket(64, BUCKETS[64], 60.0, (33, 35.0))]
    return table


def test_a_rest_just_past_a_bucket_itself_splits_once_more_where_that_wins_by_the_rule(kernel_device, monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import MAX_LAUNCHES, Dispatcher, _ShapeTable

    assert MAX_LAUNCHES == 3
    buckets = lambda table: table["gpus"][GPU]["shapes"]["256x72"]["buckets"]  # noqa: E731
    shape = _ShapeTable(buckets(_three_launch_table()), 64, "t")
    # M=34: whole 35 us (bucket 64's lesser end); two launches at best 35 (32 + 2: 30 + 5; 16 + 18: 5 + 30);
    # three 15 (16 + 16 + 2); M=48 likewise (16 + 16 + 16); M=33, an edge key: 16 + 16 + 1 (13 against 35)
    assert [shape.launches(m) for m in (34, 48, 33)] == [(16, 16, 2), (16, 16, 16), (16, 16, 1)]
    assert shape.table_us(34, (16, 16, 2)) == 15.0
    # a third launch must win by the rule too: with bucket 32 at 10.2 us, 32 + 2 take 15.2 and 16 + 16 + 2
    # take 15, not under 0.98 * 15.2: two launches (the larger first of the two tied plans)
    assert _ShapeTable(buckets(_three_launch_table(10.2)), 64, "t").launches(34) == (32, 2)
    # at most two (benchmarks/device_dispatch_ab.sh's baseline with KNOB=MAX_LAUNCHES): M=34's best two, 35 us, do not beat 35 whole
    monkeypatch.setattr(dispatch, "MAX_LAUNCHES", 2)
    assert (shape.launches(34), shape.launches(17)) == ((34,), (16, 1))
    monkeypatch.undo()
    if kernel_device != "cpu":
        pytest.skip("the interpreter table's GPU name is not this GPU")
    mm = Dispatcher(_three_launch_table(), group_size=64)
    device = torch.device("cpu")
    assert [(rows, v.id) for rows, v in mm.plan(34, 72, 256, device)] == [(16, BUCKETS[16]), (16, BUCKETS[16]),
                                                                          (2, BUCKETS[16])]
    assert mm.table_us(34, 72, 256, device) == 15.0
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    a = torch.randn(34, 256).half()
    out = mm(a, packed, scales)
    ref = a.float() @ dequantize(packed, scales, 64).float()
    assert out.shape == (34, 72) and (out.float() - ref).abs().max() / ref.abs().max() < 2e-3
    # the same three kernels on the same rows, into one output
    assert torch.equal(out, torch.cat([mm(a[:16], packed, scales), mm(a[16:32], packed, scales),
                                       mm(a[32:], packed, scales)]))


def test_a_split_calls_launches_run_most_rows_first(kernel_device, monkeypatch):
    from tunesearch import dispatch

    if kernel_device != "cpu":
        pytest.skip("the interpreter table's GPU name is not this GPU")
    # M=1's bucket at 5 us and M=2's at 2, bucket 16's pick slow (50 us): M=17 runs as 2 + 15 (52 us against
    # 60 whole; 16 + 1 takes 55), A's first two rows the first launch, but the 15 rows launch first, so the
    # two rows read the weights they left in L2
    buckets = [_bucket(1, BUCKETS[1], 5.0), _bucket(2, BUCKETS[1], 2.0), _bucket(16, BUCKETS[16], 50.0),
               _bucket(17, BUCKETS[64], 60.0), _bucket(32, BUCKETS[64], 60.0, (17, 60.0))]
    table = _split_table()
    table["gpus"][GPU]["shapes"]["256x72"]["buckets"] = buckets
    launched, real = [], dispatch.make_launcher

    def recording(variant, a, *args):
        run = real(variant, a, *args)
        return lambda a, *rest: (launched.append(a.shape[0]), run(a, *rest))[1]
    monkeypatch.setattr(dispatch, "make_launcher", recording)
    packed, scales = quantize_pack(torch.randn(256, 72), 64)
    a = torch.randn(17, 256).half()
    outs = {}
    for largest_first, order in ((True, [15, 2]), (False, [2, 15])):
        monkeypatch.setattr(dispatch, "LARGEST_FIRST", largest_first)
        mm = dispatch.Dispatcher(table, group_size=64)
        assert [rows for rows, _ in mm.plan(17, 72, 256, torch.device("cpu"))] == [2, 15]
        launched.clear()
        outs[largest_first] = mm(a, packed, scales)
        assert launched == order
    assert torch.equal(outs[True], outs[False])  # each launch writes its own rows either way

def test_export_weighs_two_launches_at_a_buckets_smallest_m_where_the_runtime_would_take_them(tmp_path):
    from tunesearch.export import build_table

    def picks(bucket16_us):
        store = Store(f"sqlite:///{tmp_path}/s{bucket16_us}.db")
        store.upsert_gpu(dict(name=GPU, capability="0.0", sm_count=1, l2_bytes=0, memory_bytes=0,
                              driver="none", torch_version="x", triton_version="3.6.0",
                              datasheet_bandwidth=None), 1e9)
        a, b = "gemm.bm64.bn64.bk64.g1.w4.s2", "gemm.bm16.bn64.bk64.g1.w4.s2"
        add(store, 1, 72, 256, BUCKETS[1], 3.0)
        add(store, 16, 72, 256, BUCKETS[16], bucket16_us)
        for vid, at32, at17 in ((a, 9.0, 20.0), (b, 9.5, 10.0)):
            add(store, 32, 72, 256, vid, at32)
            add(store, 17, 72, 256, vid, at17)
        buckets = build_table(store)["gpus"][GPU]["shapes"]["256x72"]["buckets"]
        return {x["m_max"]: x["variant"]["id"] for x in buckets}, a, b

    # M=16 and M=1 take 5 + 3 = 8 us, under 0.95 of either pick's 17..32 floor: A (the faster at 32) wins
    chosen, a, b = picks(5.0)
    assert chosen[32] == a
    # 12 + 3 = 15 us: no split; A's 20 us at M=17 is 2x B's 10, so B, 1.06x at 32, holds the bucket
    chosen, a, b = picks(12.0)
    assert chosen[32] == b


def test_a_split_calls_launches_overlap_only_where_the_first_leaves_sms_idle_long_enough():
    from tunesearch.dispatch import OVERLAP_SLACK, _ShapeTable

    # N=12288, K=4096: 256 rows on 256x128 tiles are 96 CTAs, one wave of 132 SMs with 36 idle (0.273) for its
    # 42.5 us; 2 rows at 11.3 us fit 1.5 x 0.273 x 42.5 = 17.4 us of those SMs; 128 rows at 25 us do not
    big, small = "rsmma.bm256.bn128.bk64.sk1.w8.s4", "rsmma.bm8.bn64.bk128.sk2.w4.s5.c4"
    shape = _ShapeTable([_bucket(2, small, 11.3), _bucket(128, "rsmma.bm128.bn64.bk128.sk1.w4.s5", 25.0),
                         _bucket(256, big, 42.5)], 128, "t")
    assert OVERLAP_SLACK == 1.5
    assert shape.overlaps((2, 255), 12288, 4096, 132) and shape.overlaps((255, 2), 12288, 4096, 132)
    assert not shape.overlaps((256, 128), 12288, 4096, 132)
    # 4096 columns: 32 CTAs, 100 SMs idle (0.758): 1.5 x 0.758 x 42.5 = 48.3 us holds 2 and 128 rows (36.3)
    assert shape.overlaps((256, 2, 128), 4096, 4096, 132)
    # a last wave that the first launch fills leaves nothing: 132 SMs x 1 CTA, 8448 columns = 66 x 2 token tiles
    assert not shape.overlaps((512, 2), 8448, 4096, 132)
    # one launch, or a first launch of a family whose CTAs an SM are the hardware's, never
    assert not shape.overlaps((256,), 12288, 4096, 132)
    gemm = _ShapeTable([_bucket(1, BUCKETS[1], 1.0), _bucket(64, BUCKETS[64], 40.0)], 64, "t")
    assert not gemm.overlaps((64, 1), 12288, 4096, 132)


def test_clusters_beside_false_keeps_a_later_launch_in_clusters_off_the_firsts_sms(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import _ShapeTable

    # CLUSTERS_BESIDE False (row 138's A/B setting; H100 4096x11008 M=261: 8 rows in clusters of 2 beside
    # 253 ran 52.6 us, the same plan with the 8 rows' unclustered twin 43.1): both fit the first launch's
    # idle SMs by the wave rule alone, the clustered one is kept off them
    big = "rsmma.bm256.bn128.bk64.sk1.w8.s4"
    assert dispatch.CLUSTERS_BESIDE is True  # the default: the rule as row 121 timed it
    for small, clustered in (("rsmma.bm8.bn64.bk128.sk2.w4.s5.c4", False),
                             ("rsmma.bm8.bn64.bk128.sk2.w4.s5.c4.cl2", True)):
        shape = _ShapeTable([_bucket(8, small, 11.3), _bucket(256, big, 42.5)], 128, "t")
        assert shape.overlaps((8, 249), 12288, 4096, 132)
        monkeypatch.setattr(dispatch, "CLUSTERS_BESIDE", False)
        assert shape.overlaps((8, 249), 12288, 4096, 132) is not clustered
        assert (shape.side_by_side_price(257, (8, 249), 12288, 4096, 132, False) is None) is clustered
        monkeypatch.setattr(dispatch, "CLUSTERS_BESIDE", True)
    # the largest launch in clusters keeps its place: only those that start beside it must find pairs of SMs
    shape = _ShapeTable([_bucket(8, "rsmma.bm8.bn64.bk128.sk2.w4.s5.c4", 11.3),
                         _bucket(256, big + ".cl2", 42.5)], 128, "t")
    monkeypatch.setattr(dispatch, "CLUSTERS_BESIDE", False)
    assert shape.overlaps((8, 249), 12288, 4096, 132)


def test_the_packaged_h200_table_overlaps_the_plans_row_121_found_faster_side_by_side():
    from tunesearch.dispatch import load_dispatch

    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    runs = lambda K, N, M: table.shapes[(N, K)].overlaps(table.shapes[(N, K)].launches(M), N, K, 132)  # noqa: E731
    # side by side 0.82-0.96 of their serial time on the H200 (row 121's A/B and its held-out M)
    assert all(runs(K, N, M) for K, N, M in [(4096, 12288, 257), (4096, 12288, 260), (4096, 22016, 513),
                                               (4096, 22016, 520), (4096, 12288, 1300), (4096, 11008, 1028)])
    # where the first launch fills its last wave (4096 columns: 128 CTAs) or the rest is large, serial: side by
    # side those ran up to 10% slower (11008x4096 M=257, 4096x12288 M=385 and 1100)
    assert not any(runs(K, N, M) for K, N, M in [(11008, 4096, 257), (4096, 12288, 385), (4096, 12288, 1100),
                                                   (11008, 4096, 1025), (4096, 4096, 1100)])


def test_overlap_pricing_prices_a_plan_side_by_side_only_where_the_call_would_run_it_so(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import load_dispatch

    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)

    def plans(K, N, M):
        shape = table.shapes[(N, K)]
        return [shape.launches(M, lambda rows: shape.side_by_side_price(M, rows, N, K, 132, eager))  # noqa: B023
                for eager in (False, True)]

    # on by default at 1.02 (NOTES.md row 127); here 1.05, the factor these plans were written for
    assert dispatch.OVERLAP_PRICE == 1.02
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.05)
    # 4096x11008 M=257: 256 + 1 fits the idle SMs of 256's one wave, priced at 1.05 x 43.0 us in a capture,
    # under the 51.7 us whole; called eagerly it would run serial (53.0 us by the table, under the eager bar)
    assert plans(4096, 11008, 257) == [(256, 1), (257,)]
    # 4096x12288 M=257: the serial rule's 2 + 255 runs side by side too, priced as 256 + 1 (44.6 us): a plan
    # priced no lower than the chosen one does not replace it (it ran level with it, NOTES.md row 122), nor one
    # under it by less than SIDE_BY_SIDE_LEVEL's 1% where the chosen one runs side by side too (16 + 241, 0.03%)
    assert plans(4096, 12288, 257) == [(2, 255), (2, 255)]
    # 11008x4096 M=785: 32 + 753 at 119 us serial passes the eager bar, so eager calls run it side by side too
    # (the kernels of 768 + 17, priced 0.1 us under it: the 32 rows' bucket was timed faster than 17's)
    assert plans(11008, 4096, 785) == [(32, 753), (32, 753)]
    # CONCURRENT=True runs every split call side by side, eagerly too; False prices none (``Dispatcher.plan``)
    monkeypatch.setattr(dispatch, "CONCURRENT", True)
    assert plans(4096, 11008, 257) == [(256, 1), (256, 1)]


def test_overlap_pricing_keeps_4096_squared_past_m_768_off_the_plan_that_ran_at_its_serial_sum(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import load_dispatch

    shape = next(t for name, t in load_dispatch().gpus.items() if "H200" in name).shapes[(4096, 4096)]
    # the first rule's plan, 640 + 160 side by side, ran 54.2 us on the H100 against the whole launch's 45.3
    # (NOTES.md row 123): 640's CTAs, two an SM, fill every slot but its last wave's 56, and the 128 CTAs
    # of 160's pick, one an SM, fit only the 76 SMs those leave empty: the model gives its serial sum
    assert shape.side_by_side_us((640, 160), 4096, 4096, 132) > shape.table_us(800)
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.05)
    for m in (770, 800, 850, 890):
        price = lambda rows: shape.side_by_side_price(m, rows, 4096, 4096, 132, False)  # noqa: B023, E731
        assert shape.launches(m, price)[0] != 640, m


def test_overlap_pricing_plans_a_shape_the_table_does_not_hold(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import load_dispatch
    from tunesearch.variants import DeviceLimits

    mm = load_dispatch()
    table = next(t for name, t in mm.gpus.items() if "H200" in name)
    # the price runs for a CUDA device only: the H200's table and a Hopper's limits stand in for one
    monkeypatch.setattr(mm, "_table_of", lambda device: table)
    monkeypatch.setattr(DeviceLimits, "of", classmethod(lambda cls, device=None: cls(gluon=True)))
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.02)
    cuda = torch.device("cuda")
    # a shape the table holds is priced side by side (4096x11008 M=257: 256 + 1 in a capture)...
    assert [rows for rows, _ in mm.plan(257, 11008, 4096, cuda)] == [256, 1]
    # ...and one it does not has nothing to price with: its fallback's one launch, as without the setting
    assert mm._shape_table(1000, 1024, cuda) is None
    assert [rows for rows, _ in mm.plan(300, 1000, 1024, cuda, layout="base")] == [300]


def test_the_side_by_side_floor_prunes_plans_without_changing_any(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import load_dispatch

    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    runs = {"plain": 0, "floored": 0}  # the model's runs each way
    for factor in (1.02, 1.05):
        monkeypatch.setattr(dispatch, "OVERLAP_PRICE", factor)
        for (n, k), shape in table.shapes.items():
            for m in range(257, 4097, 311):
                priced = {}

                def price(rows):
                    priced[rows] = shape.side_by_side_price(m, rows, n, k, 132, False)  # noqa: B023
                    return priced[rows]

                plain = shape.launches(m, price)
                assert all(shape.side_by_side_floor(rows, n, k, 132) <= us for rows, us in priced.items() if us is not None)
                runs["plain"] += len(priced)
                priced.clear()
                floor = lambda rows: shape.side_by_side_floor(rows, n, k, 132)  # noqa: B023, E731
                assert shape.launches(m, price, floor) == plain, (k, n, m)
                runs["floored"] += len(priced)
    # 6,239 of 43,580 with the CTA work in the floor (28,733 with the largest launch's time alone)
    assert runs["floored"] < 0.2 * runs["plain"], runs


def test_overlap_pricing_never_leaves_m_on_a_plan_priced_above_the_one_it_replaced(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import load_dispatch

    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    shape = table.shapes[(22016, 4096)]
    # 4096x22016 M=1060: the serial rule's 768 + 64 + 228 (282.9 us by the table) against 144 + 916 side by
    # side (1.05 x 274.0 = 287.7). Pricing the two-launch plan under the whole launch's 318.4 once kept the
    # three-launch plan from beating it by SPLIT_GAIN, and 144 + 916 ran 1.028x (NOTES.md row 125)
    m = 1060
    assert shape.launches(m) == (768, 64, 228)
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.05)
    price = lambda rows: shape.side_by_side_price(m, rows, 22016, 4096, 132, False)  # noqa: E731
    assert price((144, 916)) > shape.table_us(m, (768, 64, 228))
    assert shape.launches(m, price) == (768, 64, 228)
    # a plan priced level with the chosen one, to float rounding, does not replace it: 4096x12288 M=80 at a
    # factor of 1.0, 8 + 72 (the 72 on M=80's own pick, the 8 wholly beside them by the model)
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.0)
    level = table.shapes[(12288, 4096)]
    price = lambda rows: level.side_by_side_price(80, rows, 12288, 4096, 132, False)  # noqa: E731
    assert price((8, 72)) == pytest.approx(level.table_us(80), rel=1e-12)
    assert level.launches(80, price) == (80,)
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.05)
    # and across the table: a plan the price changes is priced below the serial rule's, as that one runs
    for (n, k), each in table.shapes.items():
        for m in range(257, 2049, 37):
            rows = each.launches(m)
            priced = lambda r: each.side_by_side_price(m, r, n, k, 132, False)  # noqa: B023, E731
            chosen = each.launches(m, priced)
            if chosen != rows:
                before = each.table_us(m, rows)
                before = min(before, priced(rows) or before) if len(rows) > 1 else before
                assert priced(chosen) < before, (k, n, m, rows, chosen)


def test_export_spans_join_consecutive_m_that_share_their_full_buckets():
    from tunesearch.overlap import _spans

    plans = {390: (384, 6), 385: (8, 377), 386: (8, 378), 387: (8, 379), 388: (384, 4), 700: (512, 64, 124)}
    assert _spans(plans) == [[385, 387, [8]], [388, 388, [384]], [390, 390, [384]], [700, 700, [512, 64]]]
    assert _spans({}) == []


def test_export_makes_side_by_side_plans_only_with_overlap_price_set(tmp_path, table, monkeypatch):
    from tunesearch import dispatch

    shape = json.loads(table.read_text())["gpus"][GPU]["shapes"]["256x72"]
    plans = shape["side_by_side"]
    assert plans["settings"] == dispatch.side_by_side_settings(1)  # the fixture GPU's one SM
    # none of these families' grids is modelled, so no M runs side by side: no range
    assert plans["captured"] == plans["eager"] == []
    assert plans["buckets"] == dispatch.buckets_digest(shape["buckets"])
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", None)
    store = Store(f"sqlite:///{tmp_path}/d.db")
    export(store, tmp_path / "off.json")
    assert "side_by_side" not in json.loads((tmp_path / "off.json").read_text())["gpus"][GPU]["shapes"]["256x72"]


def test_the_packaged_plans_are_the_split_rule_priced_at_the_call():
    from tunesearch import dispatch

    table = next(t for name, t in load_dispatch().gpus.items() if "H200" in name)
    N, K = 12288, 4096  # the shape with the most ranges (34 captured, 21 eager when written)
    shape = table.shapes[(N, K)]
    settings = dispatch.side_by_side_settings(132)
    assert shape.side_plans is not None and shape.side_plans[0] == settings, "re-export the packaged table"
    assert len(shape.side_plans[1]["captured"][1]) > 10
    floor = lambda rows: shape.side_by_side_floor(rows, N, K, 132)  # noqa: E731
    for m in range(1, 4200):
        for eager in (False, True):
            price = lambda rows: shape.side_by_side_price(m, rows, N, K, 132, eager)  # noqa: B023, E731
            assert shape.planned(m, eager, settings) == shape.launches(m, price, floor), (m, eager)
    # another GPU's SMs, another factor: not these plans
    assert shape.planned(300, False, dispatch.side_by_side_settings(114)) is None
    assert shape.planned(300, False, {**settings, "overlap_price": 1.05}) is None


def test_a_call_takes_the_exports_plan_and_prices_only_where_its_settings_differ(monkeypatch):
    from tunesearch import dispatch
    from tunesearch.dispatch import _ShapeTable
    from tunesearch.variants import DeviceLimits

    mm = load_dispatch()
    table = next(t for name, t in mm.gpus.items() if "H200" in name)
    monkeypatch.setattr(mm, "_table_of", lambda device: table)  # an H200 stands in for the CUDA device
    monkeypatch.setattr(DeviceLimits, "of", classmethod(lambda cls, device=None: cls(gluon=True)))
    priced = []
    real = _ShapeTable.side_by_side_price
    monkeypatch.setattr(_ShapeTable, "side_by_side_price", lambda self, *a: priced.append(a) or real(self, *a))
    cuda = torch.device("cuda")
    # 4096x11008 M=257: 256 + 1 side by side in a capture, one launch eagerly, each from the table's plans
    assert [rows for rows, _ in mm.plan(257, 11008, 4096, cuda)] == [256, 1]
    assert [rows for rows, _ in mm.plan(257, 11008, 4096, cuda, eager=True)] == [257]
    assert [rows for rows, _ in mm.plan(1300, 4096, 11008, cuda)] == [1024, 32, 244]  # the serial rule's
    assert priced == []
    monkeypatch.setattr(dispatch, "OVERLAP_PRICE", 1.05)  # an A/B's factor: priced at the call
    assert [rows for rows, _ in mm.plan(257, 11008, 4096, cuda)] == [256, 1]
    assert priced


def test_side_by_side_plans_for_other_buckets_are_not_taken_and_bad_ones_are_refused():
    from tunesearch.dispatch import Dispatcher, packaged_tables

    data = packaged_tables()
    shapes = data["gpus"]["NVIDIA H200"]["shapes"]
    shapes["4096x11008"]["buckets"][3]["us"] += 1.0  # a table edited after its export
    gpu = Dispatcher(data).gpus["NVIDIA H200"]
    assert gpu.shapes[(11008, 4096)].side_plans is None and gpu.shapes[(12288, 4096)].side_plans is not None
    for bad in ([[300, 290, [256]]], [[257, 260, [256]], [260, 270, [256]]], [[257, 260, [300]]], [[257, 260]]):
        broken = json.loads(json.dumps(data))
        broken["gpus"]["NVIDIA H200"]["shapes"]["4096x12288"]["side_by_side"]["captured"] = bad
        with pytest.raises(DispatchError, match="4096x12288: bad side_by_side plans"):
            Dispatcher(broken)
