import json

import pytest

from tunesearch.variants import (FAMILIES, GEMV_MAX_M, Variant, heuristic_variants, variant_error,
                                 variant_space)
from tunesearch.variants.space import SWAPAB_MAX_M


def test_ids_and_dicts_round_trip_through_json():
    for variant in variant_space(4, 520, 1024, 64):
        assert Variant.from_dict(json.loads(variant.to_json())) == variant
        assert Variant.from_id(variant.id) == variant
        assert variant.id.startswith(variant.family + ".")


def test_id_is_human_readable_and_stable():
    v = Variant("gemv", dict(BM=1, BN=128, BK=256, SPLIT_K=4, num_warps=4, num_stages=2))
    assert v.id == "gemv.bm1.bn128.bk256.sk4.w4.s2"
    assert v.to_dict() == {"family": "gemv", "id": v.id,
                           "params": dict(BM=1, BN=128, BK=256, SPLIT_K=4, num_warps=4, num_stages=2)}


@pytest.mark.parametrize("bad", ["gemv.bm1", "nope.bm1.bn1.bk1.sk1.w1.s1", "gemv.bm1.bn128.bk256.sk4.w4.x2"])
def test_unknown_ids_are_rejected(bad):
    with pytest.raises(ValueError, match="unknown"):
        Variant.from_id(bad)


def test_a_parameter_added_later_keeps_the_stored_ids():
    # rsmma's CTAS came after its trials were stored: an id or a dict without it is CTAS=1, and the id
    # leaves it out at 1 (so "rsmma.bm128....s4" still names the kernel it named); other values are written
    old = Variant.from_id("rsmma.bm128.bn64.bk64.sk1.w4.s4")
    assert old.params["CTAS"] == 1 and old.id == "rsmma.bm128.bn64.bk64.sk1.w4.s4"
    stored = {"family": "rsmma", "id": old.id, "params": dict(BM=128, BN=64, BK=64, SPLIT_K=1, num_warps=4,
                                                                 num_stages=4)}
    assert Variant.from_dict(stored) == old
    two = Variant.from_id("rsmma.bm128.bn64.bk64.sk1.w4.s4.c2")
    assert two.params["CTAS"] == 2 and two.id.endswith(".s4.c2") and two != old
    assert Variant.from_id("rsmma.bm128.bn64.bk64.sk1.w4.s4.c1") == old
    for bad in ("rsmma.bm128.bn64.bk64.sk1.w4.c2", "rsmma.bm128.bn64.bk64.sk1.w4.s4.c2.c3",
                "rsmma.bm128.bn64.bk64.sk1.w4.s4.x2"):
        with pytest.raises(ValueError, match="unknown"):
            Variant.from_id(bad)
    with pytest.raises(ValueError, match="CTAS must be an int >= 1"):
        Variant.from_id("rsmma.bm128.bn64.bk64.sk1.w4.s4.c0")


def test_rsmma_skew_is_a_later_parameter_of_split_tiles_only():
    # SKEW came after rsmma's trials were stored: left out of an id at 0, written after CTAS otherwise;
    # it needs a split tile, and each other split must keep a block of its even share
    from tunesearch.variants import DeviceLimits

    hopper = DeviceLimits(gluon=True)
    old = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3")
    assert old.params["SKEW"] == 0 and Variant.from_id(old.id + ".skew0") == old
    skewed = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4")
    assert skewed.params["SKEW"] == 4 and skewed.id.endswith(".c3.skew4") and skewed != old
    assert Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.skew4").params == {**skewed.params, "CTAS": 1}
    assert variant_error(skewed, 1, 11008, 4096, 128, hopper) is None  # 32 blocks: 12 and 20
    one_split = Variant.from_id("rsmma.bm8.bn64.bk128.sk1.w4.s6.c3.skew2")
    assert "SPLIT_K must be 2 or more" in variant_error(one_split, 1, 11008, 4096, 128, hopper)
    stream_k = Variant.from_id("rsmma.bm8.bn64.bk128.sk0.w4.s6.c3.skew2")
    assert "SPLIT_K must be 2 or more" in variant_error(stream_k, 1, 11008, 4096, 128, hopper)
    # K=1024: 8 blocks, 4 splits of 2; a skew of 2 would leave the other splits none
    assert variant_error(Variant.from_id("rsmma.bm8.bn64.bk128.sk4.w4.s6.skew1"), 1, 4096, 1024, 128, hopper) is None
    assert "no block" in variant_error(Variant.from_id("rsmma.bm8.bn64.bk128.sk4.w4.s6.skew2"), 1, 4096, 1024,
                                       128, hopper)
    with pytest.raises(ValueError, match="SKEW must be an int >= 0"):
        Variant("rsmma", {**old.params, "SKEW": -1})


def test_rsmma_cluster_is_a_later_parameter_of_split_k_grids_with_paired_column_tiles():
    # CLUSTER came after rsmma's trials were stored: left out of an id at 1, written last otherwise; it
    # pairs neighbouring column tiles along the split-K grid's x, so it needs an even count of them
    from tunesearch.variants import DeviceLimits

    hopper = DeviceLimits(gluon=True)
    old = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4")
    assert old.params["CLUSTER"] == 1 and Variant.from_id(old.id + ".cl1") == old
    paired = Variant.from_id(old.id + ".cl2")
    assert paired.params == {**old.params, "CLUSTER": 2} and paired.id.endswith(".skew4.cl2") and paired != old
    assert variant_error(paired, 1, 11008, 4096, 128, hopper) is None  # 172 column tiles of 64
    assert "a multiple of it" in variant_error(paired, 1, 8256, 4096, 128, hopper)  # 129 of them
    stream_k = Variant.from_id("rsmma.bm8.bn64.bk128.sk0.w4.s6.c3.cl2")
    assert "SPLIT_K >= 1" in variant_error(stream_k, 1, 11008, 4096, 128, hopper)
    assert "1 or 2" in variant_error(Variant.from_id(old.id + ".cl4"), 1, 11008, 4096, 128, hopper)


def test_from_dict_rejects_an_id_that_disagrees():
    d = Variant.from_id("gemv.bm1.bn128.bk256.sk4.w4.s2").to_dict()
    d["id"] = "gemv.bm1.bn128.bk256.sk8.w4.s2"
    with pytest.raises(ValueError, match="does not match"):
        Variant.from_dict(d)


def test_variants_are_immutable_and_hashable():
    v = Variant.from_id("gemm.bm64.bn128.bk64.g8.w4.s3")
    with pytest.raises(AttributeError):
        v.family = "gemv"
    assert len({v, Variant.from_id(v.id)}) == 1


@pytest.mark.parametrize("M", [1, 7, 16, 33, 512])
def test_space_holds_only_valid_variants(M):
    space = variant_space(M, 4160, 4096, 128)
    assert space and len(set(space)) == len(space)
    for v in space:
        assert variant_error(v, M, 4160, 4096, 128, prune=True) is None
        p = v.params
        blocks = 4096 // p["BK"]
        assert 4096 % p["BK"] == 0 and p.get("SPLIT_K", 1) <= blocks
    families = {v.family for v in space}
    assert ("gemv" in families) == (M <= GEMV_MAX_M)
    assert ("swapab" in families) == (M <= SWAPAB_MAX_M)
    assert "gemm" in families


def test_invalid_configs_are_rejected_with_a_reason():
    v = Variant.from_id("splitk.bm16.bn128.bk128.sk16.w4.s3")
    assert "exceeds the K/BK=8 blocks" in variant_error(v, 1, 4096, 1024, 128)
    assert "multiple of BK=128" in variant_error(v, 1, 4096, 11008 + 64, 128)
    assert variant_error(v, 1, 4096, 11008, 128) is None  # 86 blocks: 15 splits of 6, one of 2
    v = Variant.from_id("splitk.bm16.bn128.bk128.sk16.w4.s3")
    assert "empty" in variant_error(v, 1, 4096, 18 * 128, 128, prune=True)  # 9 splits of 2 cover it
    # a few empty splits stay in the search: 172 blocks in 29 splits of 6 (3 of 32 empty)
    assert variant_error(Variant.from_id("gemv.bm1.bn64.bk64.sk32.w2.s2"), 1, 4096, 11008, 128, prune=True) is None
    v = Variant.from_id("swapab.bm16.bn64.bk256.sk1.w4.s3")
    assert "group size" in variant_error(v, 1, 4096, 4096, 128)
    assert variant_error(v, 1, 4096, 4096, 256) is None
    assert "BK/8 >= 16" in variant_error(Variant.from_id("swapab.bm16.bn64.bk64.sk1.w4.s3"), 1, 4096, 4096, 128)
    v = Variant.from_id("gemm.bm16.bn128.bk64.g1.w4.s3")
    assert "divide" in variant_error(v, 1, 4096, 4096, 96)
    v = Variant.from_id("gemm.bm128.bn256.bk128.g1.w4.s4")
    assert variant_error(v, 512, 4096, 4096, 128) is not None
    v = Variant.from_id("gemv.bm1.bn128.bk64.sk1.w4.s1")
    assert "M <=" in variant_error(v, 33, 4096, 4096, 128, prune=True)
    assert variant_error(v, 33, 4096, 4096, 128) is None  # pruned from the search, yet correct


def test_heuristics_are_valid_and_cover_families():
    for M in (1, 8, 16, 64, 4096):
        seeds = heuristic_variants(M, 11008, 4096)
        assert seeds and all(variant_error(v, M, 11008, 4096) is None for v in seeds)
        assert {v.family for v in seeds} <= set(FAMILIES)
    assert heuristic_variants(1, 11008, 4096)[0].family == "gemv"
    # the H200 sweeps' winners (trials_llama7b_h200_2026-11-30_s5): gemv at M=1 with many small
    # programs, swapab with 1.5 programs per SM at M=2..128, dequantize-then-cuBLAS above
    assert heuristic_variants(1, 11008, 4096)[0].id == "gemv.bm1.bn256.bk64.sk32.w2.s2"
    assert heuristic_variants(1, 4096, 4096)[0].id == "gemv.bm1.bn64.bk64.sk32.w2.s2"
    assert heuristic_variants(4, 4096, 4096)[0].id == "swapab.bm16.bn128.bk128.sk8.w4.s3"
    assert heuristic_variants(4, 11008, 4096)[0].id == "swapab.bm16.bn128.bk128.sk4.w4.s3"
    assert heuristic_variants(16, 22016, 4096)[0].id == "swapab.bm16.bn128.bk128.sk2.w4.s3"
    assert heuristic_variants(128, 4096, 4096)[0].id == "swapab.bm64.bn128.bk128.sk4.w4.s3"
    assert heuristic_variants(256, 11008, 4096)[0].family == "dequant"


def test_spread_variants_start_each_family_at_its_heuristic_and_corners():
    from tunesearch.variants import spread_variants

    seeds = spread_variants(1, 11008, 4096, per_family=4)
    heuristics = heuristic_variants(1, 11008, 4096)
    assert len(seeds) == 4 * len(heuristics) and len(set(seeds)) == len(seeds)
    for h in heuristics:
        family = [v for v in seeds if v.family == h.family]
        assert family[0] == h and len(family) == 4
    assert all(variant_error(v, 1, 11008, 4096) is None for v in seeds)


def test_the_gluon_family_is_offered_only_where_gluon_runs():
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import DQMMA_M, dqmma_shared_bytes

    v = Variant.from_id("dqmma.bm128.bn128.bk64.sk1.w8.s8")
    # never assumed: not by default, not on the CPU, not in the interpreter
    rs = Variant.from_id("rsmma.bm128.bn128.bk64.sk1.w8.s8")
    for device in (None, "cpu"):
        assert "needs an sm_90 GPU" in variant_error(v, 128, 11008, 4096, 128, device)
        assert "needs an sm_90 GPU" in variant_error(rs, 128, 11008, 4096, 128, device)
        assert not any(v.family in ("dqmma", "rsmma") for v in variant_space(128, 11008, 4096, 128, device))
        assert all(v.family not in ("dqmma", "rsmma") for v in heuristic_variants(128, 11008, 4096, 128, device))
    hopper = DeviceLimits(gluon=True)
    assert variant_error(v, 128, 11008, 4096, 128, hopper) is None
    for M in (1, 16, 32, 48, 64, 96, 128, 192, 256, 1024):
        space = [v for v in variant_space(M, 11008, 4096, 128, hopper) if v.family == "dqmma"]
        assert bool(space) == (DQMMA_M[0] <= M <= DQMMA_M[1])
        for d in space:
            p = d.params
            assert p["num_warps"] == p["BM"] // 16 and 128 % p["BK"] == 0
            assert dqmma_shared_bytes(p["BM"], p["BN"], p["BK"], p["num_stages"]) <= hopper.shared_memory
    def seed(M, N, K, family):
        return next(v.id for v in heuristic_variants(M, N, K, 128, hopper) if v.family == family)

    assert seed(128, 11008, 4096, "dqmma") == "dqmma.bm128.bn128.bk128.sk1.w8.s4"
    # over one wave of 128x128 tiles (172 on 132 SMs) stream-K first
    assert seed(128, 22016, 4096, "dqmma") == "dqmma.bm128.bn128.bk128.sk0.w8.s4"
    # its own rules, with reasons
    assert "BM must be 64 or 128" in variant_error(Variant.from_id("dqmma.bm128.bn128.bk64.sk1.w4.s8"),
                                                     128, 11008, 4096, 128, hopper)
    assert "shared memory" in variant_error(Variant.from_id("dqmma.bm128.bn128.bk128.sk1.w8.s8"),
                                            128, 11008, 4096, 128, hopper)
    assert "divide the group size" in variant_error(v, 128, 11008, 4096, 32, hopper)
    assert "64, 128 or 256" in variant_error(Variant.from_id("dqmma.bm128.bn32.bk64.sk1.w8.s3"),
                                             128, 11008, 4096, 128, hopper)
    assert "BK must be 64" in variant_error(Variant.from_id("dqmma.bm128.bn256.bk128.sk1.w8.s3"),
                                            128, 11008, 4096, 128, hopper)
    assert variant_error(Variant.from_id("dqmma.bm128.bn256.bk64.sk1.w8.s4"), 256, 11008, 4096, 128, hopper) is None
    assert "multiple of 16" in variant_error(v, 128, 11004, 4096, 128, hopper)  # scale rows of 2N bytes
    # at bm128.bn128.bk128 four stages fit (the H200's best) and five do not
    assert variant_error(Variant.from_id("dqmma.bm128.bn128.bk128.sk1.w8.s4"), 128, 11008, 4096, 128, hopper) is None
    assert "shared memory" in variant_error(Variant.from_id("dqmma.bm128.bn128.bk128.sk1.w8.s5"),
                                            128, 11008, 4096, 128, hopper)


def test_twotile_is_offered_where_one_of_its_tiles_holds_m_on_frag32_with_its_own_rules():
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import TWOTILE_CTAS, TWOTILE_M, rsmma_shared_bytes

    hopper = DeviceLimits(gluon=True)
    for M in (1, 64, 65, 72, 80, 96, 97, 128, 129, 136, 160, 192, 193, 256):
        space = [v for v in variant_space(M, 12288, 4096, 128, hopper, layout="frag32") if v.family == "twotile"]
        assert bool(space) == (64 < M <= 96 or 128 < M <= 192) and (not space or TWOTILE_M[0] <= M <= TWOTILE_M[1])
        for v in space:
            p = v.params
            assert p["BM"] < M <= p["BM"] + p["LO"] and p["LO"] < p["BM"] and p["num_warps"] == p["BN"] // 16
            assert p["CTAS"] <= TWOTILE_CTAS[(p["BM"], p["BN"])] and p["SPLIT_K"] in (0, 1, 2, 4) and p["BK"] == 64
            assert p["CTAS"] * (rsmma_shared_bytes(p["BM"] + p["LO"], p["BN"], 64, p["num_stages"]) + 2048) \
                <= hopper.sm_shared_memory
        # never on the base layout, nor where Gluon does not run
        assert not any(v.family == "twotile" for v in variant_space(M, 12288, 4096, 128, hopper))
        assert not any(v.family == "twotile" for v in variant_space(M, 12288, 4096, 128, "cpu", layout="frag32"))
    # its seed follows rsmma's: the narrowest LO that holds M, 4 stages at the most CTAs an SM (the
    # experiment's winners, NOTES.md row 91)
    seeds = [v.id for v in heuristic_variants(129, 12288, 4096, 128, hopper, layout="frag32")]
    assert seeds[1] == "twotile.bm128.lo8.bn64.bk64.sk1.w4.s4.c2" and seeds[0].startswith("rsmma.")
    seeds = [v.id for v in heuristic_variants(96, 22016, 4096, 128, hopper, layout="frag32")]
    assert seeds[1] == "twotile.bm64.lo32.bn64.bk64.sk1.w4.s4.c3"
    # its rules, with reasons; any M runs (a bucket's variant serves all of its M), the search offers M past HI
    v = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk1.w4.s4.c2")
    assert v.params["LO"] == 32 and Variant.from_id(v.id) == v
    assert variant_error(v, 5, 12288, 4096, 128, hopper, layout="frag32") is None
    assert "128 < M <= 160" in variant_error(v, 161, 12288, 4096, 128, hopper, prune=True, layout="frag32")
    assert "does not read" in variant_error(v, 150, 12288, 4096, 128, hopper)
    for bad, reason in (("twotile.bm64.lo64.bn64.bk64.sk1.w4.s4.c2", "below it"),
                        ("twotile.bm128.lo32.bn64.bk128.sk1.w4.s2.c2", "BK=64"),
                        ("twotile.bm128.lo32.bn64.bk64.sk1.w4.s4.c3", "fits 2 CTAs"),
                        ("twotile.bm128.lo32.bn128.bk64.sk1.w4.s4.c1", "num_warps = BN/16")):
        assert reason in variant_error(Variant.from_id(bad), 150, 12288, 4096, 128, hopper, layout="frag32"), bad
    # SPLIT_K CTAs a tile (stream-K's machinery, space.twotile_grid) where the column tiles leave SMs idle:
    # 64 tiles of N=4096 take two splits, 192 of N=12288 fill the SMs already
    split = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk2.w4.s6.c1")
    assert variant_error(split, 150, 4096, 11008, 128, hopper, prune=True, layout="frag32") is None
    assert "already fill" in variant_error(split, 150, 12288, 4096, 128, hopper, prune=True, layout="frag32")
    seeds = [v.id for v in heuristic_variants(150, 4096, 11008, 128, hopper, layout="frag32")]
    assert seeds[1] == "twotile.bm128.lo32.bn64.bk64.sk2.w4.s6.c1"


def test_rsmmapf_is_offered_where_rsmma_splits_on_frag32_with_its_own_rules():
    # rsmmapf (variants/rsmmapf.py) is rsmma's split launch with its partials prefetched: offered at M <= 64 on
    # frag32 where Gluon runs, split launches only, its partials in the ring only where an A stage holds one
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import (RSMMAPF_M, family_twins, launch_waves, rsmma_shared_bytes,
                                           rsmmapf_extra_bytes, token_tiles)

    hopper = DeviceLimits(gluon=True)
    for M in (1, 3, 16, 32, 64, 65, 128):
        space = [v for v in variant_space(M, 11008, 4096, 128, hopper, layout="frag32") if v.family == "rsmmapf"]
        assert bool(space) == (M <= 64) and (not space or RSMMAPF_M[0] <= M <= RSMMAPF_M[1])
        for v in space:
            p = v.params
            assert p["SPLIT_K"] in (2, 4) and p["num_stages"] * p["BK"] >= 2 * p["BN"]
            assert not p["RING"] or (p["BK"] == 2 * p["BN"] and p["SPLIT_K"] - 1 <= p["num_stages"])
            assert p["CTAS"] == 1 or p["CTAS"] * (rsmma_shared_bytes(p["BM"], p["BN"], p["BK"], p["num_stages"])
                                                  + rsmmapf_extra_bytes(p["BM"], p["BN"], p["SPLIT_K"], p["RING"])
                                                  + 2048) <= hopper.sm_shared_memory
        assert {v["RING"] for v in space} == ({0, 1} if space else set())
        # never on the base layout, nor where Gluon does not run
        assert not any(v.family == "rsmmapf" for v in variant_space(M, 11008, 4096, 128, hopper))
        assert not any(v.family == "rsmmapf" for v in variant_space(M, 11008, 4096, 128, "cpu", layout="frag32"))
    # an id is its rsmma twin's with the family's name and RING (left out at 0); the twins of a split rsmma
    # launch, in the ring first (the experiment's winner at two splits, NOTES.md row 132)
    twin = Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3.skew4")
    assert [v.id for v in family_twins(twin)] == ["rsmmapf.bm8.bn64.bk128.sk2.w4.s6.c3.skew4.ring1",
                                                  "rsmmapf.bm8.bn64.bk128.sk2.w4.s6.c3.skew4"]
    assert all(Variant.from_id(v.id) == v for v in family_twins(twin))
    assert family_twins(Variant.from_id("rsmma.bm8.bn64.bk128.sk1.w4.s6.c3")) == []
    assert family_twins(Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk2.w4.s6.c1")) == []
    ring = family_twins(twin)[0]
    for M in (1, 5, 8, 40):  # rsmma's grid and token tiles: the schedule model and the buckets read them alike
        assert launch_waves("rsmmapf", ring.params, M, 11008, 4096, 132) == \
            launch_waves("rsmma", twin.params, M, 11008, 4096, 132)
        assert token_tiles("rsmmapf", ring.params, M) == token_tiles("rsmma", twin.params, M)
    # its rules, with reasons
    for bad, reason in (("rsmmapf.bm8.bn64.bk128.sk1.w4.s6.c3", "SPLIT_K must be 2"),
                        ("rsmmapf.bm8.bn64.bk64.sk2.w4.s6.c3.ring1", "BK must be 2 BN"),
                        ("rsmmapf.bm8.bn64.bk128.sk4.w4.s2.c3.ring1", "num_stages >= 3"),
                        ("rsmmapf.bm8.bn128.bk64.sk2.w8.s1", "num_stages x BK >= 2 BN")):
        assert reason in variant_error(Variant.from_id(bad), 1, 11008, 4096, 128, hopper, layout="frag32"), bad
    assert "does not read" in variant_error(ring, 1, 11008, 4096, 128, hopper)
    assert "is for 1 <= M <= 64" in variant_error(ring, 65, 11008, 4096, 128, hopper, prune=True, layout="frag32")
    # three 32-token CTAs an SM fit rsmma's rings, and rsmmapf's with the partials in the ring, but not with
    # four splits' partials in a buffer of their own (32 KB a CTA more)
    for vid, fits in (("rsmma.bm32.bn64.bk128.sk4.w4.s6.c3", True),
                      ("rsmmapf.bm32.bn64.bk128.sk4.w4.s6.c3.ring1", True),
                      ("rsmmapf.bm32.bn64.bk128.sk4.w4.s6.c3", False)):
        reason = variant_error(Variant.from_id(vid), 32, 11008, 4096, 128, hopper, prune=True, layout="frag32")
        assert (reason is None) == fits and (fits or "2 of its rings fit" in reason), (vid, reason)
    # its seed follows rsmma's and twotile's: rsmma's M <= 32 seed where it splits, in the ring
    seeds = [v.id for v in heuristic_variants(1, 11008, 4096, 128, hopper, layout="frag32")]
    assert seeds[:2] == ["rsmma.bm8.bn64.bk128.sk2.w4.s6.c3", "rsmmapf.bm8.bn64.bk128.sk2.w4.s6.c3.ring1"]
    assert not any(v.startswith("rsmmapf") for v in seeds[:1]
                   + [v.id for v in heuristic_variants(1, 11008, 4096, 128, hopper)])


def test_rsmma_is_offered_in_its_m_range_with_its_own_rules():
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import RSMMA_M, next_pow2, rsmma_shared_bytes

    hopper = DeviceLimits(gluon=True)
    for M in (1, 2, 8, 16, 17, 24, 32, 48, 64, 96, 128, 192, 256, 384, 1024, 4096, 4097):
        space = [v for v in variant_space(M, 11008, 4096, 128, hopper) if v.family == "rsmma"]
        assert bool(space) == (RSMMA_M[0] <= M <= RSMMA_M[1])
        for v in space:
            p = v.params
            assert p["num_warps"] == p["BN"] // 16 and 128 % p["BK"] == 0 and p["BM"] <= max(64, next_pow2(M))
            assert rsmma_shared_bytes(p["BM"], p["BN"], p["BK"], p["num_stages"]) + 1024 <= hopper.shared_memory
        if space:  # it leads the seeds where it is offered (it beat the table's picks there, rows 50-61, 77)
            seeds = [v.family for v in heuristic_variants(M, 11008, 4096, 128, hopper)]
            assert seeds.index("rsmma") == (1 if M == 1 else 0)  # but after the gemv at M=1
    # the probes' winners: one warp group and two splits where 64 column tiles fill half the SMs; no split
    # over 86 tiles (row 52: 2 and 3 splits lost, their fp32 partials cost more than the idle SMs); two
    # CTAs an SM of 64-column tiles where those outnumber the SMs (row 53), not at BM=256 (its registers)
    assert heuristic_variants(128, 4096, 11008, 128, hopper)[0].id == "rsmma.bm128.bn64.bk64.sk2.w4.s8"
    assert heuristic_variants(128, 11008, 4096, 128, hopper)[0].id == "rsmma.bm128.bn64.bk64.sk1.w4.s4.c2"
    assert heuristic_variants(256, 11008, 4096, 128, hopper)[0].id == "rsmma.bm256.bn128.bk64.sk1.w8.s6"
    # above M=256 the _s35 sweep's winners (row 77): to M=512 one warp group of 128-token tiles at 2 CTAs an
    # SM, then two warp groups of 256-token tiles; one split, 3 stages
    assert heuristic_variants(512, 4096, 4096, 128, hopper)[0].id == "rsmma.bm128.bn64.bk128.sk1.w4.s3.c2"
    assert heuristic_variants(1024, 11008, 4096, 128, hopper)[0].id == "rsmma.bm256.bn128.bk64.sk1.w8.s3"
    assert heuristic_variants(4096, 4096, 22016, 128, hopper)[0].id == "rsmma.bm256.bn128.bk64.sk1.w8.s3"
    # the split partials' workspace is bounded (2 x 4096 x 22016 fp32 is 688 MiB); one split has none
    wide = dict(M=4096, N=22016, K=4096, group_size=128, device=hopper)
    assert variant_error(Variant.from_id("rsmma.bm256.bn128.bk64.sk1.w8.s6"), **wide) is None
    assert "workspace" in variant_error(Variant.from_id("rsmma.bm256.bn128.bk64.sk2.w8.s6"), **wide)
    # at M <= 32 the sweeps' winners (rows 58, 61, 64, 67): one token tile of 8, 16 or 32, BK=128, 3 CTAs an
    # SM, 6 stages, the fewest splits giving two CTAs per SM: 172 column tiles of 64 (N=11008) take 2, 64
    # (N=4096) take 4, 344 (N=22016) one
    assert heuristic_variants(32, 11008, 4096, 128, hopper)[0].id == "rsmma.bm32.bn64.bk128.sk2.w4.s6.c3"
    assert heuristic_variants(32, 4096, 11008, 128, hopper)[0].id == "rsmma.bm32.bn64.bk128.sk4.w4.s6.c3"
    assert heuristic_variants(8, 22016, 4096, 128, hopper)[0].id == "rsmma.bm8.bn64.bk128.sk1.w4.s6.c3"
    assert heuristic_variants(16, 11008, 4096, 128, hopper)[0].id == "rsmma.bm16.bn64.bk128.sk2.w4.s6.c3"
    # stream-K (row 65) is searched, not seeded: it lost at every M <= 64 key of the _s29 anatomy
    assert "rsmma.bm16.bn64.bk128.sk0.w4.s6.c3" in {v.id for v in variant_space(16, 11008, 4096, 128, hopper)}
    # a token tile no wider than M needs (16 at least; 8 where one holds M), and at most two of them under 64
    # tokens: each streams the weights again (32-token tiles are not offered above M=64, 16-token ones above
    # M=32)
    assert {v["BM"] for v in variant_space(1, 11008, 4096, 128, hopper) if v.family == "rsmma"} == {8, 16}
    assert {v["BM"] for v in variant_space(8, 11008, 4096, 128, hopper) if v.family == "rsmma"} == {8, 16}
    assert {v["BM"] for v in variant_space(9, 11008, 4096, 128, hopper) if v.family == "rsmma"} == {16}
    assert {v["BM"] for v in variant_space(24, 11008, 4096, 128, hopper) if v.family == "rsmma"} == {16, 32}
    assert {v["BM"] for v in variant_space(48, 11008, 4096, 128, hopper) if v.family == "rsmma"} == {32, 64}
    assert {v["BM"] for v in variant_space(96, 11008, 4096, 128, hopper) if v.family == "rsmma"} == {64, 128}

    def error(ident, M=128, N=11008, K=4096, G=128):
        return variant_error(Variant.from_id(ident), M, N, K, G, hopper)

    assert error("rsmma.bm128.bn128.bk64.sk1.w8.s8") is None
    assert "num_warps = BN/16" in error("rsmma.bm128.bn128.bk64.sk1.w4.s8")
    assert "BN must be 64 or 128" in error("rsmma.bm128.bn256.bk64.sk1.w16.s3")
    assert "8, 16, 32, 64, 128 or 256 tokens" in error("rsmma.bm4.bn128.bk64.sk1.w8.s4", M=4)
    # token tiles of 8 where one holds M (row 66: fewer of A's box rows past M), at 3 CTAs an SM too: valid
    # (the anatomy launches them), not yet in the grid
    assert error("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3", M=8) is None
    assert variant_error(Variant.from_id("rsmma.bm8.bn64.bk128.sk2.w4.s6.c3"), 16, 11008, 4096, 128, hopper,
                         prune=True).startswith("BM=8 is for M <= 8")
    assert error("rsmma.bm16.bn64.bk128.sk2.w4.s4.c4", M=16) is None
    assert error("rsmma.bm32.bn64.bk128.sk2.w4.s4.c3", M=32) is None
    assert "divide the group size" in error("rsmma.bm128.bn128.bk128.sk1.w8.s4", G=64)
    assert "BK=32 must be >= 64" in error("rsmma.bm128.bn128.bk32.sk1.w8.s4")
    assert "num_stages >= 2" in error("rsmma.bm128.bn128.bk64.sk1.w8.s1")
    assert "multiple of 16" in error("rsmma.bm128.bn128.bk64.sk1.w8.s4", N=11004)
    # the ring at bm256.bn64.bk128: 3 stages fit the SM, 4 do not (50.5 KB a stage)
    assert error("rsmma.bm256.bn64.bk128.sk1.w4.s3", M=256) is None
    assert "shared memory" in error("rsmma.bm256.bn64.bk128.sk1.w4.s4", M=256)
    # CTAS: the launch's registers (rsmma_launch) must hold the tile's MMA warps: 232 / 128 / 80 / 64 a
    # thread for 1-4 CTAs of BN=64 (8 warps with the loader's group), 168 / 80 for BN=128 (12 warps)
    assert error("rsmma.bm128.bn64.bk64.sk1.w4.s4.c2") is None
    assert "leaves 80 registers" in error("rsmma.bm128.bn64.bk64.sk1.w4.s4.c3")
    assert "need 160" in error("rsmma.bm256.bn64.bk64.sk1.w4.s4.c2", M=256)
    assert error("rsmma.bm64.bn64.bk64.sk1.w4.s3.c4", M=64) is None
    # stream-K: its CTAs are as many as run at once, so several an SM count whenever the blocks outnumber
    # the SMs (64 column tiles of 32 blocks at M=16: 2048), not only where the tiles do
    def pruned(ident, M, N, K):
        return variant_error(Variant.from_id(ident), M, N, K, 128, hopper, prune=True)

    assert pruned("rsmma.bm16.bn64.bk128.sk0.w4.s6.c3", 16, 4096, 4096) is None
    assert "only takes registers" in pruned("rsmma.bm16.bn64.bk128.sk1.w4.s6.c3", 16, 4096, 4096)
    assert "only takes registers" in pruned("rsmma.bm16.bn64.bk128.sk0.w4.s6.c3", 16, 128, 256)
    assert "need 80" in error("rsmma.bm64.bn64.bk128.sk1.w4.s3.c4", M=64)
    assert error("rsmma.bm64.bn128.bk64.sk1.w8.s3.c2", M=64) is None
    assert "need 96" in error("rsmma.bm64.bn128.bk128.sk1.w8.s3.c2", M=64)
    assert "1 to 4" in error("rsmma.bm64.bn64.bk64.sk1.w4.s3.c5", M=64)
    # a tile the register table has not measured (BK=256, with groups of 256) runs only alone
    assert error("rsmma.bm64.bn64.bk256.sk1.w4.s3", M=64, G=256) is None
    assert "CTAS must be 1" in error("rsmma.bm64.bn64.bk256.sk1.w4.s3.c2", M=64, G=256)


def test_rsmma_ctas_are_pruned_where_they_cannot_share_an_sm():
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import rsmma_ctas_fit, rsmma_shared_bytes

    hopper = DeviceLimits(gluon=True)

    def pruned(ident, M=128, N=11008, K=4096):
        return variant_error(Variant.from_id(ident), M, N, K, 128, hopper, prune=True)

    # 172 tiles of 64 columns at 4096x11008 M=128 outnumber the 132 SMs; 64 tiles at N=4096 do not
    assert pruned("rsmma.bm128.bn64.bk64.sk1.w4.s4.c2") is None
    assert "each have an SM of their own" in pruned("rsmma.bm128.bn64.bk64.sk1.w4.s4.c2", N=4096)
    assert pruned("rsmma.bm128.bn64.bk64.sk4.w4.s4.c2", N=4096) is None  # 256 CTAs with the splits
    # two rings of 4 stages (18.6 KB a stage) fit the SM's 228 KB, of 6 stages too, of 8 not
    assert rsmma_ctas_fit(128, 64, 64, 4, hopper) == 3 and rsmma_ctas_fit(128, 64, 64, 6, hopper) == 2
    assert rsmma_ctas_fit(128, 64, 64, 8, hopper) == 1
    assert 2 * (rsmma_shared_bytes(128, 64, 64, 8) + 2048) > hopper.sm_shared_memory
    assert "1 of its rings fit" in pruned("rsmma.bm128.bn64.bk64.sk1.w4.s8.c2")
    assert pruned("rsmma.bm128.bn64.bk64.sk1.w4.s6.c2") is None
    # the space offers each CTAS only where it fits: never more than the rings and registers allow
    space = [v for v in variant_space(128, 11008, 4096, 128, hopper) if v.family == "rsmma"]
    assert {v["CTAS"] for v in space} == {1, 2, 3, 4}
    for v in space:
        p = v.params
        assert p["CTAS"] <= rsmma_ctas_fit(p["BM"], p["BN"], p["BK"], p["num_stages"], hopper)


def test_dqmma_w_buffers_are_the_kernels():
    # space counts dqmma's shared memory without importing the Gluon module: the two constants agree
    from tunesearch.variants import dqmma
    from tunesearch.variants.space import DQMMA_W_BUFFERS

    assert dqmma.W_BUFFERS == DQMMA_W_BUFFERS


def test_a_sweep_says_which_families_the_gpu_runs(monkeypatch):
    from tunesearch.cli import _families_line, _families_off
    from tunesearch.variants import DeviceLimits

    for gluon in (False, True):
        monkeypatch.setattr(DeviceLimits, "of", classmethod(lambda cls, device=None: cls(name="GPU X", gluon=gluon)))
        line = _families_line(*_families_off(0))
        assert line.startswith("families on GPU X: gemm, splitk, gemv, swapab, dequant, dqchunk")
        assert ("dqmma, rsmma, twotile, rsmmapf off" in line) != gluon
        assert ("dqchunk, dqmma, rsmma, twotile, rsmmapf" in line) == gluon


def test_a_sweep_of_only_families_the_gpu_cannot_run_fails_clearly(monkeypatch, tmp_path):
    # `--families dqmma` on a GPU without Gluon would otherwise measure nothing and say "0 new trials"
    from typer.testing import CliRunner

    import tunesearch.gpu as gpu
    from tunesearch.cli import app
    from tunesearch.variants import DeviceLimits

    monkeypatch.setattr(gpu, "resolve_devices", lambda spec: [0])
    monkeypatch.setattr(DeviceLimits, "of", classmethod(lambda cls, device=None: cls(name="GPU X", gluon=False)))
    db = f"sqlite:///{tmp_path}/ts.db"
    r = CliRunner().invoke(app, ["sweep", "--families", "dqmma", "--db", db])
    assert r.exit_code == 1 and "none of them runs on GPU X" in r.output


def test_gluon_stream_k_grid_bounds_every_tiles_partials():
    """SPLIT_K=0 (stream-K): CTA c takes units [c U // P, (c + 1) U // P) of the line of (tile, block)
    units. The kernel finds a unit's CTA as ((u + 1) P - 1) // U and a tile's contributors as the CTAs
    of its first and last unit; the workspace holds ``gluon_grid``'s count of partials per tile. Checked
    here against the ranges themselves on shapes with 1 to ~10 contributors per tile."""
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import STREAM_K, gluon_grid

    assert Variant.from_id("dqmma.bm128.bn128.bk128.sk0.w8.s4").params["SPLIT_K"] == STREAM_K
    with pytest.raises(ValueError, match=">= 1"):
        Variant.from_id("splitk.bm16.bn64.bk64.sk0.w4.s3")  # only the Gluon families know stream-K
    assert Variant.from_id("rsmma.bm16.bn64.bk128.sk0.w4.s6.c3").params["SPLIT_K"] == STREAM_K
    for M, N, K, bm, bn, bk, sms in [(128, 11008, 4096, 128, 128, 128, 132), (64, 4096, 4096, 64, 128, 128, 132),
                                     (65, 200, 512, 64, 64, 64, 132), (256, 22016, 4096, 128, 256, 64, 132),
                                     (130, 4160, 1024, 128, 64, 64, 7), (64, 64, 128, 64, 64, 64, 132),
                                     # rsmma's: 16-token tiles, 3 CTAs an SM (396 at once, 5 to 14 blocks each)
                                     (16, 11008, 4096, 16, 64, 128, 396), (1, 4096, 4096, 16, 64, 128, 396)]:
        grid, parts = gluon_grid(M, N, K, bm, bn, bk, STREAM_K, sms)
        blocks = K // bk
        units = -(-M // bm) * -(-N // bn) * blocks
        ctas = grid[0]
        assert grid[1:] == (1, 1) and ctas == min(sms, units)
        owner = [c for c in range(ctas) for _ in range(c * units // ctas, (c + 1) * units // ctas)]
        assert len(owner) == units  # every unit in exactly one range
        assert all(((u + 1) * ctas - 1) // units == owner[u] for u in range(units))
        most = max(owner[t * blocks + blocks - 1] - owner[t * blocks] + 1 for t in range(units // blocks))
        assert most <= parts <= most + 1, (M, N, K, most, parts)
    assert gluon_grid(128, 11008, 4096, 128, 128, 128, 2, 132) == ((86, 2, 1), 2)
    hopper = DeviceLimits(gluon=True)
    assert variant_error(Variant.from_id("dqmma.bm128.bn128.bk128.sk0.w8.s4"), 128, 11008, 4096, 128, hopper) is None


def test_token_tiles_count_the_tiles_of_launches_that_run_alike():
    from tunesearch.variants.space import token_tiles

    rsmma = Variant.from_id("rsmma.bm128.bn64.bk128.sk1.w4.s3.c2").params
    # below one tile's rows A's box passes A's edge, so M itself matters there: no count
    assert [token_tiles("rsmma", rsmma, m) for m in (1, 127, 128, 129, 256, 257, 1200, 1280)] == \
        [None, None, 1, 2, 2, 3, 10, 10]
    twotile = Variant.from_id("twotile.bm128.lo32.bn64.bk64.sk1.w4.s4.c2").params
    # 128 + 32 tokens a tile; at M <= HI its LO box stores nothing and its HI box passes A's edge
    assert [token_tiles("twotile", twotile, m) for m in (128, 129, 160, 161, 320, 321)] == [None, 1, 1, 2, 2, 3]
    gemm = Variant.from_id("gemm.bm64.bn64.bk64.g1.w4.s2").params
    assert token_tiles("gemm", gemm, 640) is None
