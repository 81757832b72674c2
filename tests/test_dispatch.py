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


def add(store, m, n, k, vid, us, g=64):
    v = Variant.from_id(vid)
    store.add_trial(Trial(gpu_id=1, gpu_name=GPU, m=m, n=n, k=k, group_size=g, layout="base",
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
             if b["code"] != family_code(b["variant"]["family"], code_version())]
    assert not stale, stale[:5]
