"""EXPERIMENT: one rsmma token tile of HI + LO tokens as two accumulators on one weight fragment (M = 129..192,
and 65..96).

    python benchmarks/experiments/rsmma_two_tiles.py OUT_DIR     (on an sm_90 GPU: checked against
                                                                  A @ dequantize(W), timed beside the
                                                                  table's pick and cuBLAS fp16; env
                                                                  TWO_TILES_SHAPES "KxN,...",
                                                                  TWO_TILES_MS "129,136",
                                                                  TWO_TILES_CONFIGS "config;config")
    python benchmarks/experiments/rsmma_two_tiles.py --compile CONFIG   (offline, sm_90: registers, spills,
                                                                         the wgmmas left in flight)

Why (NOTES.md row 88, the `_s42` session plan): past 128 tokens every variant of the space takes a third
64-token tile or a second 128-token one over all the weights, so the bucket M=129..192 costs what M=256
costs (43 us on 4096x12288 wherever M falls, cuBLAS fp16 29.4 us at M=129, 31.9 at 160, 47.5 at 192).
The wgmma's N (here the token count) may be any multiple of 8 up to 256, but Triton's tensors need
power-of-two shapes, so a 136-, 144-, 160- or 192-token tile is two accumulators: [BN, HI] and [BN, LO]
(HI = 128; LO = 8, 16, 32 or 64), both fed from the one unpacked weight fragment of a block. The unpack
(the MMA warps' chain, row 78) is paid once for HI + LO tokens instead of once per token tile. The same
with HI = 64 and LO = 8..32 for M = 65..96, which the family runs as a 128-token tile or two 64-token ones.

RESULT (H200, 2026-12-02, benchmarks/results/rsmma_two_tiles_h200_2026-12-02_s45.json, NOTES.md row 91): it
won on the wide shapes (4096x12288 M=129..192 29.4-34.2 us against the table's 43.6-43.9; 4096x22016 M=65..96
32.4-35.7 against 48.8-49.1) and is now the twotile family (variants/twotile.py), whose kernel this imports.

The kernel is rsmma's (variants/rsmma.py), cut down to what the experiment needs: frag32 weights, the
scaled fragment (the family's form above 32 tokens), tiles of HI + LO tokens (any M: a bucket's variant
runs at every M of the bucket). The ring's A slot is two TMA boxes of the same activations, kept inside
A as the family's shifted last tile is (`dqmma.token_origin`; `_token_rows`): for M in (HI, HI + LO]
rows [0, HI) and [M - LO, M), the LO accumulator's rows below HI repeating the HI one's, masked at the
store. One tile a CTA: both accumulators leave through the drained ring as the family's staged store does
(`rsmma._store_tile_staged`), HI through the HI boxes' ring and LO through the LO boxes'.

A config: "BN,HI,LO,BK,STAGES,CTAS,STREAM", e.g. "64,128,64,64,4,2,1": BN/16 MMA warps, CTAS CTAs
an SM (the launch's registers, `rsmma_launch.launch_registers`), a CTA per column tile (STREAM=0) or
stream-K over CTAS x the SMs (STREAM=1: each CTA an equal run of all the column tiles' blocks, each
segment stored as it ends through the family's split reduction, `dqmma.store_tile`, the LO accumulators'
workspace slots and counters after the HI ones'). Past 128 tokens the grids are few and large: 192 CTAs of
BN=64 on 4096x12288 leave 60 of the 132 SMs with two, so the wave lasts what two CTAs on one SM take;
stream-K evens that out (the family's M=128 pick, 384 CTAs three an SM, fills its wave).
"""
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

# the kernel is the twotile family's since it won here (NOTES.md row 91)
from tunesearch.variants.twotile import two_tile_kernel  # noqa: E402


def parse_config(text: str) -> dict:
    bn, hi, lo, bk, stages, ctas, stream = (int(x) for x in text.split(","))
    return dict(BN=bn, HI=hi, LO=lo, BK=bk, STAGES=stages, CTAS=ctas, STREAM=stream)


def config_id(c: dict) -> str:
    return f"hi{c['HI']}.lo{c['LO']}.bn{c['BN']}.bk{c['BK']}.s{c['STAGES']}.c{c['CTAS']}" + (".sk0" if c["STREAM"] else "")


def variant_of(config: dict):
    """The twotile family's variant for ``config`` (STREAM=1 is its stream-K, SPLIT_K=0)."""
    from tunesearch.variants import Variant

    return Variant("twotile", dict(BM=config["HI"], LO=config["LO"], BN=config["BN"], BK=config["BK"],
                                   SPLIT_K=0 if config["STREAM"] else 1, num_warps=config["BN"] // 16,
                                   num_stages=config["STAGES"], CTAS=config["CTAS"]))


def launch_args(config: dict, a, packed_f, scales, out):
    """(grid, args, meta) of the family's launch for ``config`` on frag32 weights ``packed_f`` [K/32, 4N]
    (``api._twotile_call``: a CTA per tile of HI + LO tokens and BN columns, or stream-K over CTAS x the
    SMs with fp32 slots [BN, HI] and [BN, LO] for each part of each tile and their counters). The family's
    space rules are not asked: the experiment timed BK=128 too."""
    from tunesearch.variants.api import _twotile_call

    _, grid, args, meta = _twotile_call(variant_of(config).params, a, packed_f, scales, out, 128)
    return grid, args, meta


def two_tile_launch(config: dict):
    """gluon_checks' launch form: (a, packed, scales, out) -> a no-argument launch."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.kernel_launch(two_tile_kernel, lambda *operands: launch_args(config, *operands))


FIELDS = ("BN", "HI", "LO", "BK", "STAGES", "CTAS", "STREAM")  # a config's order on the command line


def smoke_shapes(config: dict):
    """Mask edges (M, K, N): M at HI + 1 and HI + LO (one tile, the LO box shifted), past it (a second tile,
    shifted, and a third) and below HI; N no multiple of BN (but of 16, as every llama N is: the binaries
    ``warm`` compiled serve, where N = 200 would make each child compile its own); K of two blocks to eight."""
    hi, tile = config["HI"], config["HI"] + config["LO"]
    return [(hi + 1, 256, 208), (tile, 1024, 528), (tile + 3, 512, 272), (2 * tile + 5, 256, 208), (5, 256, 272)]


def smoke(config: dict) -> str | None:
    """``config`` on its smoke shapes against A @ dequantize(W) (the weights packed in the base layout and
    repacked to frag32, as dqmma_rs.py does); None, or what went wrong."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.frag32_smoke(two_tile_launch(config), smoke_shapes(config))


def compile_offline(config: dict, N: int = 12288, K: int = 4096):
    """The kernel for ``config`` compiled for sm_90 without a GPU (CPU tensors for the descriptors), at
    M = HI + LO."""
    from benchmarks.experiments import gluon_checks

    return gluon_checks.compile_frag32_offline(two_tile_kernel, lambda *operands: launch_args(config, *operands),
                                               config["HI"] + config["LO"], N, K)


# (BN, HI, LO, BK, STAGES, CTAS, STREAM): 64-column tiles three (HI=64), two or one CTA an SM, 128-column
# tiles one, the deepest ring that fits the SM's 227 KB at that count; a CTA per column tile (192 CTAs of
# BN=64 on 4096x12288: 132 SMs hold 60 of them twice, so the wave lasts as long as two CTAs on one SM take)
# or stream-K over CTAS x the SMs (each an equal run of the blocks, the family's reduction where a tile is
# split). Offline, all 50 compile for sm_90 with 2 wgmmas in flight; stream-K spills 8 and 16 bytes at
# 128 + 32 and 128 + 64 tokens, BK=128, two CTAs an SM (timed all the same); 64 + LO tokens at BK=128 three
# CTAs an SM waits for every wgmma (left out).
CONFIGS = [dict(BN=bn, HI=128, LO=lo, BK=bk, STAGES=stages, CTAS=ctas, STREAM=stream)
           for lo in (8, 16, 32, 64) for bn, bk, stages, ctas in ((64, 64, 4, 2), (64, 128, 2, 2), (64, 64, 6, 1),
                                                                 (128, 64, 4, 1))
           for stream in (0, 1)]
CONFIGS += [dict(BN=bn, HI=64, LO=lo, BK=64, STAGES=stages, CTAS=ctas, STREAM=stream)
            for lo in (8, 16, 32) for bn, stages, ctas in ((64, 4, 3), (64, 6, 2), (128, 4, 1)) for stream in (0, 1)]
MS = (65, 72, 80, 96, 129, 136, 160, 192)


def timed_at(config: dict, M: int) -> bool:
    """Whether ``config`` is timed at M: within the bucket it is meant for (65..96 for HI=64, 129..192 for
    HI=128), where M past HI + LO takes a second tile, as a bucket's variant would at its other end. With
    TWO_TILES_ANY_M set, at any M past HI (tiles of 256 + LO tokens at M = 1025..1280, NOTES.md row 120)."""
    if os.environ.get("TWO_TILES_ANY_M"):
        return config["HI"] < M
    return config["HI"] < M <= config["HI"] * 3 // 2


def _warm_one(config: dict, M: int, K: int, N: int) -> str | None:
    """Compile ``config`` for the real call's arguments on the GPU (``tunesearch.compile``'s way: the binary
    lands in Triton's disk cache under the key the timed launch looks up); None or the error."""
    try:
        cuda = torch.device("cuda")
        a = torch.empty(M, K, dtype=torch.float16, device=cuda)
        packed = torch.empty(K // 32, 4 * N, dtype=torch.int32, device=cuda)
        scales = torch.empty(K // 128, N, dtype=torch.float16, device=cuda)
        out = torch.empty(M, N, dtype=torch.float16, device=cuda)
        grid, args, meta = launch_args(config, a, packed, scales, out)
        two_tile_kernel.warmup(*args, grid=grid, **meta)
        return None
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:300]}"


def warm(configs, keys):
    """Every config's compile for each (M, K, N) of ``keys`` that it fits, over the host's cores: compiles
    (seconds each, ~100 of them) would otherwise take most of a device call."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # one job per (config, M's divisibility by 16): every llama shape's N and K are multiples of 16, and
    # Triton specializes integer arguments on that alone, so the other keys find the same binary (were
    # that wrong, a timed launch would compile for itself: slower, not wrong)
    jobs = list({(config_id(c), M % 16 == 0): (c, M, K, N) for c in configs for M, K, N in keys
                 if timed_at(c, M)}.values())
    workers = max(1, min(16, (os.cpu_count() or 2) - 1))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        errors = [e for e in pool.map(_warm_one, *zip(*jobs)) if e]
    print(f"compiled {len(jobs)} (config, key) pairs on {workers} processes; {len(errors)} failed"
          + (f", the first: {errors[0]}" if errors else ""), flush=True)


def main(out_dir):
    from benchmarks.experiments import gluon_checks
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    shapes = [(4096, 12288), (4096, 22016), (4096, 11008), (11008, 4096), (4096, 4096)]
    only = os.environ.get("TWO_TILES_SHAPES")  # "KxN,..."
    if only:
        shapes = [tuple(int(x) for x in s.split("x")) for s in only.split(",")]
    configs = [parse_config(c) for c in os.environ["TWO_TILES_CONFIGS"].split(";")] if os.environ.get(
        "TWO_TILES_CONFIGS") else CONFIGS
    ms = [int(m) for m in os.environ["TWO_TILES_MS"].split(",")] if os.environ.get("TWO_TILES_MS") else MS
    warm(configs, [(M, K, N) for K, N in shapes for M in ms])
    unsound = gluon_checks.smoke_all(__file__, FIELDS, configs, config_id)
    configs = [c for c in configs if config_id(c) not in unsound]
    rows = []
    for K, N in shapes:
        layout = table.layout_for(N, K, torch.device("cuda"))
        if layout != "frag32":
            print(f"{K}x{N}: the table keeps layout {layout}; the experiment reads frag32 only", flush=True)
            continue
        for M in ms:
            pick = table.resolve(M, N, K, torch.device("cuda"))
            check = CheckInputs(M, N, K, 128, "cuda", layout=layout)
            ops = Operands(M, N, K, 128, info.l2_bytes, layout=layout)
            fp16 = time_fp16(M, N, K, info.l2_bytes, replays=20).us
            # as the bench times it (CLUSTER launches too); None: the table dequantizes for cuBLAS there
            picked = time_variant(pick, ops, replays=20).us if pick is not None else None
            row = dict(M=M, K=K, N=N, fp16=fp16, pick=pick.id if pick is not None else "dequant+cuBLAS",
                       pick_us=picked, configs={})
            for config in configs:
                if not timed_at(config, M):
                    continue
                try:
                    err = gluon_checks.relative_error_of(two_tile_launch(config), check)
                    if not err < REL_TOL:
                        raise AssertionError(f"WRONG: relative error {err:.3g}")
                    us = graph_time([two_tile_launch(config)(*c) for c in ops.copies], replays=20).us
                    row["configs"][config_id(config)] = dict(us=us, rel_error=err)
                except Exception as e:  # one config's failure is a result, not the run's end
                    row["configs"][config_id(config)] = dict(error=f"{type(e).__name__}: {str(e)[:300]}")
            rows.append(row)
            print(json.dumps(row), flush=True)
            del ops
            with open(f"{out_dir}/rsmma_two_tiles.json", "w") as f:
                json.dump(dict(gpu=info.to_dict(), smoke_failures=unsound, rows=rows), f, indent=1)
    print_table(rows)


def print_table(rows):
    """A line a key: cuBLAS fp16, the table's pick and the fastest two-tile config (µs), and that config."""
    nan = float("nan")
    print(f"{'key':>16} {'fp16':>7} {'pick':>7} {'2-tile':>7} config")
    for r in rows:
        timed = {c: v["us"] for c, v in r["configs"].items() if "us" in v}
        best = min(timed, key=timed.get) if timed else None
        print(f"{'M=%d %dx%d' % (r['M'], r['K'], r['N']):>16} {r['fp16']:7.2f} {r['pick_us'] or nan:7.2f} "
              f"{timed[best] if best else nan:7.2f} {best or '-'}")


if __name__ == "__main__":
    from benchmarks.experiments import gluon_checks

    gluon_checks.config_cli(sys.argv, parse_config, smoke, compile_offline, main)
