"""EXPERIMENT: the dqmma family's warp-specialized kernel, with the forms the family does not search.

    python benchmarks/experiments/gluon_ws.py OUT_DIR [streamk|probe]   (on an sm_90 GPU: check, then time)
    python benchmarks/experiments/gluon_ws.py --compile BM,BN,BK,SPLIT_K,STAGES,W_BUFFERS[,UW[,MMA_LOADS]]   (offline)

The kernel is variants/dqmma.py's (its docstring has the schedule: a TMA loader warp, 4 unpack warps,
the MMA warps, mbarrier hand-offs). Here W_BUFFERS and the unpack warps (4 or 8) vary, and PARTS times
its anatomy (1: the unpack without the MMA, 2: the MMA without the unpack; wrong results).

The probe first runs each config on small mask-edge shapes in a child process with a timeout (a wrong
barrier phase hangs rather than fails: that config is then recorded HANG and skipped), checks it at the
key against A @ dequantize(W), and only then times it, beside the packaged table's pick, cuBLAS fp16
and the family's bm128.bn128.bk128 4-stage variant through tunesearch's own launch path (the same
kernel: the two should agree). Timed on the H200: NOTES.md rows 45-47 (MMA_LOADS, the 8th config field:
the MMA warps issue the TMA, no loader partition; the family's form at BN=256) and row 49 (`streamk`:
SPLIT_K=0, the 4th field, is stream-K; `probe`: see PROBE below).
"""
import json
import sys
from pathlib import Path

import torch
import triton

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

from benchmarks.experiments import gluon_checks  # noqa: E402
from tunesearch.variants.dqmma import dqmma_kernel, descriptors, launch_registers  # noqa: E402  (the family's kernel)


def unpack_registers(UNPACK_WARPS):
    return 128 if UNPACK_WARPS == 4 else 96


def ws_launcher(a, packed, scales, out, BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, PARTS=3, UNPACK_WARPS=4,
                MMA_LOADS=0, group_size=128):
    """A no-argument callable running the kernel on these operands (for graph capture). SPLIT_K=0 is
    stream-K over the device's SMs."""
    from tunesearch.variants.space import DeviceLimits, gluon_grid

    M, K = a.shape
    N = packed.shape[1]
    tiles_m, tiles_n = triton.cdiv(M, BM), triton.cdiv(N, BN)
    grid, parts = gluon_grid(M, N, K, BM, BN, BK, SPLIT_K, DeviceLimits.of(a.device).num_sms)
    ws = torch.empty(tiles_m * tiles_n * parts * BM * BN if parts > 1 else 1, dtype=torch.float32, device=a.device)
    locks = torch.zeros(tiles_m * tiles_n, dtype=torch.int32, device=a.device)
    args = (*descriptors(a, packed, scales, BM, BN, BK), out, ws, locks, M, N, K, *out.stride())
    meta = dict(GROUP=group_size, BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, MAX_PARTS=parts, STAGES=STAGES,
                W_BUFFERS=W_BUFFERS, PARTS=PARTS, UNPACK_WARPS=UNPACK_WARPS,
                UNPACK_REGS=unpack_registers(UNPACK_WARPS), MMA_LOADS=bool(MMA_LOADS), num_warps=BM // 16,
                maxnreg=launch_registers(BM, UNPACK_WARPS, MMA_LOADS))
    return lambda: dqmma_kernel[grid](*args, **meta)


def compile_offline(BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS=4, MMA_LOADS=0, PARTS=3, group_size=128):
    """The kernel compiled for sm_90 without a GPU (descriptors of a 4096-deep layer's operands)."""
    a = torch.empty(BM, 4096, dtype=torch.float16)
    packed = torch.empty(512, 11008, dtype=torch.int32)
    scales = torch.empty(32, 11008, dtype=torch.float16)
    consts = dict(GROUP=group_size, BM=BM, BN=BN, BK=BK, SPLIT_K=SPLIT_K, MAX_PARTS=SPLIT_K or 3,
                  STAGES=STAGES, W_BUFFERS=W_BUFFERS,
                  PARTS=PARTS, UNPACK_WARPS=UNPACK_WARPS, UNPACK_REGS=unpack_registers(UNPACK_WARPS),
                  MMA_LOADS=bool(MMA_LOADS), num_warps=BM // 16)
    return gluon_checks.compile_tma_kernel(dqmma_kernel, descriptors(a, packed, scales, BM, BN, BK), consts,
                                           BM // 16, launch_registers(BM, UNPACK_WARPS, MMA_LOADS))


def schedule(BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS=4, MMA_LOADS=0) -> dict:
    """What the compiled kernel holds (sm_90, offline): wgmma and their waits, TMA loads, the partitions'
    register moves, shared memory (and the buffers' and mbarriers' share, as the family's validity rule
    counts it), registers and spills."""
    from benchmarks.sass_stats import disassemble, resources, wgmma_waits
    from tunesearch.variants.space import dqmma_shared_bytes

    compiled = compile_offline(BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS, MMA_LOADS)
    sass = disassemble(compiled)
    return dict(wgmma=sum(op.startswith("HGMMA") for _, op, _ in sass),
                waits=wgmma_waits(sass),
                tma_loads=sum(op.startswith("UTMALDG") for _, op, _ in sass),
                setmaxreg=sum("SETMAXREG" in op for _, op, _ in sass),
                shared=compiled.metadata.shared, buffers=dqmma_shared_bytes(BM, BN, BK, STAGES, W_BUFFERS),
                **resources(compiled))


# (M, K, N) and per M the configs (FIELDS below); the first of each gets the anatomy forms. This run (row
# 47) sets BN=256, which compiles only with MMA_LOADS (12 warps at 168 registers; a 64x256 wgmma needs 154),
# beside the family's row-46 pick bm128.bn128.bk128 with and without MMA_LOADS.
KEYS = [(64, 4096, 11008), (128, 4096, 11008), (128, 4096, 12288), (128, 4096, 22016), (128, 4096, 4096),
        (128, 11008, 4096), (256, 4096, 11008)]
CONFIGS = {64: [(64, 256, 64, 1, 4, 2, 4, 1), (64, 128, 128, 1, 4, 2, 4, 0), (64, 128, 128, 1, 4, 2, 4, 1),
                (64, 256, 64, 2, 4, 2, 4, 1)],
           128: [(128, 256, 64, 3, 4, 2, 4, 1), (128, 128, 128, 1, 4, 2, 4, 0), (128, 128, 128, 1, 4, 2, 4, 1),
                 (128, 256, 64, 1, 4, 2, 4, 1), (128, 256, 64, 2, 4, 2, 4, 1), (128, 256, 64, 4, 4, 2, 4, 1)],
           256: [(128, 256, 64, 1, 4, 2, 4, 1), (128, 128, 128, 1, 4, 2, 4, 0), (128, 256, 64, 2, 4, 2, 4, 1)]}
# Row 45's sets, (BM, BN, BK, SPLIT_K, STAGES, W_BUFFERS, UNPACK_WARPS) with the loader partition:
# 64: (64,128,64,1,6,3,4) (64,128,128,1,4,2,4) (64,128,128,1,4,2,8) (64,128,128,1,5,2,4); 128: (128,128,64,1,6,3,4)
# (128,128,128,1,3,2,4) (128,128,128,1,4,2,4) (128,128,64,4,6,3,4) (128,128,128,2,3,2,4) (64,128,128,2,4,2,8);
# 256: (128,128,64,1,6,3,4) (128,128,128,1,3,2,4) (128,128,128,1,4,2,4).
# (UNPACK_WARPS=8 beside BM=128 does not launch: worker partitions are padded to warp groups, and 8 MMA
# + 4 + 8 warps exceed 512 threads at 128 registers.)
FIELDS = ("BM", "BN", "BK", "SPLIT_K", "STAGES", "W_BUFFERS", "UNPACK_WARPS", "MMA_LOADS")

# `probe` (row 49; needs benchmarks/experiments/dqmma_probe.patch applied to variants/dqmma.py as of
# commit f37ab38, before stream-K: it does not apply to later trees, whose dqmma ignores PARTS 4-16): what
# holds a block at ~1.1 us when its tensor work is ~0.5 us. PARTS beyond 1/2: 4 skips A's copy, 8 the
# weights' (packed and scales), 16 rotates each column tile's block order by pid_n (so the CTAs do not
# all ask for the same A block at once). Forms per config: (PARTS, label).
# `streamk` (row 49): SPLIT_K=0, a CTA per SM splitting all (tile, block) units evenly, against the
# packaged table's split-K picks (timed beside as "table").
_SK0 = (128, 128, 128, 0, 4, 2, 4, 0)
_SK0_64 = (64, 128, 128, 0, 6, 2, 4, 0)
_SK0_256 = (128, 256, 64, 0, 4, 2, 4, 1)
STREAMK = {(64, 4096, 11008): [_SK0_64, (64, 128, 128, 0, 4, 2, 4, 0), (64, 256, 64, 0, 4, 2, 4, 1)],
           (64, 4096, 4096): [_SK0_64],
           (128, 4096, 11008): [_SK0, _SK0_256, _SK0_64],
           (128, 11008, 4096): [_SK0, _SK0_256],
           (128, 4096, 4096): [_SK0, _SK0_64],
           (128, 4096, 22016): [_SK0, _SK0_256],
           (256, 4096, 11008): [_SK0, _SK0_256],
           (256, 11008, 4096): [_SK0, _SK0_256]}
PROBE_FORMS = [(3, "ws"), (2, "mma only"), (1, "unpack only"), (7, "ws, no A copy"), (6, "mma only, no A copy"),
               (11, "ws, no W copy"), (14, "mma only, no copies"), (19, "ws, rotated")]
PROBE_SHORT = [(3, "ws"), (7, "ws, no A copy"), (14, "mma only, no copies"), (19, "ws, rotated")]
PROBE = [((128, 4096, 11008), (128, 128, 128, 1, 4, 2, 4, 0), PROBE_FORMS),
         ((128, 4096, 11008), (128, 256, 64, 3, 4, 2, 4, 1),
          PROBE_SHORT + [(2, "mma only"), (6, "mma only, no A copy")]),
         ((128, 4096, 11008), (128, 128, 128, 2, 4, 2, 4, 0), PROBE_SHORT),
         ((128, 11008, 4096), (128, 128, 128, 4, 4, 2, 4, 0), PROBE_FORMS),
         ((128, 11008, 4096), (128, 64, 128, 2, 4, 2, 4, 0), PROBE_SHORT),
         ((64, 4096, 11008), (64, 128, 128, 1, 6, 2, 4, 0), PROBE_FORMS),
         ((256, 4096, 11008), (128, 256, 64, 1, 4, 2, 4, 1), PROBE_SHORT)]


# Mask edges for the smoke check: M across the row tiles (65, 130), N no multiple of BN (200), K of one
# block per split (256 in two splits of 64-deep blocks is 2 each) and of several (1024).
SMOKE_SHAPES = [(65, 256, 200), (130, 1024, 520), (128, 4096, 4096)]


def _launch(config):
    """``config``'s launch on any operands, as gluon_checks takes it."""
    return lambda a, packed, scales, out: ws_launcher(a, packed, scales, out, **config)


def smoke(config) -> str | None:
    """Run ``config`` on the smoke shapes against A @ dequantize(W); None, or what went wrong."""
    return gluon_checks.smoke(_launch(config), SMOKE_SHAPES)


def smoke_in_child(config, timeout_s=45) -> str | None:
    """``smoke`` in a process of its own, so that a hang (a barrier waited on with the wrong phase never
    completes) costs this config its timeout instead of the whole probe."""
    return gluon_checks.smoke_in_child(__file__, FIELDS, config, timeout_s)


def main(out_dir, probe=None):
    from tunesearch.bench import REL_TOL, CheckInputs, Operands, graph_time, time_fp16, time_variant
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.gpu import gpu_info
    from tunesearch.variants import Variant

    info = gpu_info(0)
    table = Dispatcher(read_table(ROOT / "tunesearch" / "tables" / "h200.json"), strict=True)
    dqmma = Variant.from_id("dqmma.bm128.bn128.bk128.sk1.w8.s4")
    rows, smoked = [], {}
    plan = {}
    if probe == "probe":
        for key, config, forms in PROBE:
            plan.setdefault(key, []).append((config, forms))
    elif probe == "streamk":
        for key, configs in STREAMK.items():
            plan[key] = [(c, [(3, "ws")] + ([(2, "mma only"), (1, "unpack only")] if n == 0 else []))
                         for n, c in enumerate(configs)]
    else:
        for M, K, N in KEYS:
            plan[(M, K, N)] = [(c, [(3, "ws")] + ([(1, "unpack only"), (2, "mma only")] if n == 0 else []))
                               for n, c in enumerate(CONFIGS[M])]
    for (M, K, N), configs in plan.items():
        ops = Operands(M, N, K, 128, info.l2_bytes)
        inputs = CheckInputs(M, N, K, 128, "cuda")
        shipped = table.resolve(M, N, K, torch.device("cuda"))
        ref = dict(fp16=time_fp16(M, N, K, info.l2_bytes, replays=20).us,
                   table=time_variant(shipped, ops, replays=20).us, table_variant=shipped.id,
                   dqmma=time_variant(dqmma, ops, replays=20).us)
        print(f"M={M} {K}x{N}: fp16 {ref['fp16']:.2f} | table {ref['table']:.2f} ({shipped.id}) | "
              f"dqmma {ref['dqmma']:.2f}", flush=True)
        for key, forms in configs:
            if key not in smoked:  # once per config, in a child process: a hang must not stop the probe
                smoked[key] = smoke_in_child(dict(zip(FIELDS, key)))
            for parts, label in forms:
                config = dict(zip(FIELDS, key), PARTS=parts)
                try:
                    if smoked[key]:
                        raise RuntimeError(smoked[key])
                    if parts & 15 == 3:  # checked first; a wrong result is recorded and not timed
                        err = gluon_checks.relative_error_of(_launch(config), inputs)
                        if not err < REL_TOL:
                            raise AssertionError(f"WRONG: relative error {err:.3g}")
                    us = graph_time([ws_launcher(*c, **config) for c in ops.copies], replays=20).us
                except Exception as e:  # a config that does not compile, fit or compute right: say so
                    us = f"{type(e).__name__}: {str(e)[:160]}"
                rows.append(dict(M=M, K=K, N=N, config=config, form=label, us=us, **ref))
                shown = us if isinstance(us, str) else f"{us:.2f}"
                print("  bm{} bn{} bk{} sk{} s{} wb{} uw{} mmaloads{} ".format(*key) + f"{label}: {shown}", flush=True)
        del ops, inputs
        with open(f"{out_dir}/gluon_ws.json", "w") as f:
            json.dump(dict(gpu=info.to_dict(), rows=rows), f, indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "--compile":  # offline, no GPU: python ... --compile BM,BN,BK,SPLIT_K,STAGES,W_BUFFERS[,UW]
        print(json.dumps(schedule(*map(int, sys.argv[2].split(",")))))
    elif sys.argv[1] == "--smoke":  # on the GPU, one config: python ... --smoke BM,BN,BK,SPLIT_K,STAGES,W_BUFFERS,UW
        problem = smoke(dict(zip(FIELDS, map(int, sys.argv[2].split(",")))))
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    else:
        main(sys.argv[1], probe=(sys.argv[2:] or [None])[0])
