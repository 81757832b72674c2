"""Device probe: ceilings, and every (or a sample of) variant timed at a few keys.

    python benchmarks/probe.py OUT_DIR [CAP [MxKxN,MxKxN... [FAMILY,FAMILY...]]]
Writes OUT_DIR/probe.json (one row per variant) and prints the best per family per key; with
FAMILY only those families are sampled (the heuristic seeds of every family are still timed).
With CAP at least the space's size, a key's space is timed exhaustively (the baseline of
benchmarks/search_quality.py).
"""
import json
import random
import sys
import time


from tunesearch.bench import REL_TOL, CheckInputs, Operands, kernel_bytes, time_fp16, time_variant
from tunesearch.compile import Compiler
from tunesearch.gpu import gpu_info, measure_copy_bandwidth, stream_read_floor
from tunesearch.variants import FAMILIES, heuristic_variants, variant_space

KEYS = [(1, 4096, 11008), (1, 4096, 4096), (16, 4096, 11008), (64, 4096, 11008), (1024, 4096, 11008)]


def main(out_dir, cap=250, keys=KEYS, families=FAMILIES):
    t0 = time.time()
    info = gpu_info(0)
    bw = measure_copy_bandwidth(0)
    print(info, f"copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    floors = {}
    for K, N in sorted({(k, n) for _, k, n in keys}):
        nbytes = kernel_bytes(1, N, K, 128)
        floors[f"{K}x{N}"] = stream_read_floor(nbytes, info.l2_bytes, info.sm_count).us
        print(f"stream floor {K}x{N} {nbytes / 1e6:.1f} MB: {floors[f'{K}x{N}']:.2f} us", flush=True)
    rows = []
    with Compiler(0) as compiler:
        for M, K, N in keys:
            rng = random.Random(M)
            space = [v for v in variant_space(M, N, K, 128, device=0) if v.family in families]
            sample = list(dict.fromkeys(heuristic_variants(M, N, K, 128, 0) + rng.sample(space, min(cap, len(space)))))
            tc = time.time()
            errors = compiler.compile([v.id for v in sample], M, N, K, 128)
            tc = time.time() - tc
            ops = Operands(M, N, K, 128, info.l2_bytes)
            inputs = CheckInputs(M, N, K, 128, "cuda")
            fp16 = time_fp16(M, N, K, info.l2_bytes).us
            tt = time.time()
            for v in sample:
                row = dict(M=M, K=K, N=N, id=v.id, family=v.family, error=errors[v.id])
                if row["error"] is None:
                    try:
                        err = inputs.check(v)
                        assert err < REL_TOL, f"relative error {err:.3g}"
                        row["us"] = time_variant(v, ops, replays=20).us
                    except Exception as exc:
                        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(row)
            tt = time.time() - tt
            del ops, inputs
            roof = kernel_bytes(M, N, K, 128) / bw * 1e6
            print(f"\nM={M} K={K} N={N}: {len(sample)} variants of {len(space)}, compile {tc:.0f}s, "
                  f"check+time {tt:.0f}s; fp16 {fp16:.1f} us; roofline {roof:.2f} us", flush=True)
            for family in FAMILIES:
                ok = sorted((r for r in rows if r["M"] == M and r["N"] == N and r["K"] == K and r.get("family") == family
                             and "us" in r), key=lambda r: r["us"])
                bad = [r for r in rows if r["M"] == M and r["N"] == N and r["K"] == K and r.get("family") == family and r["error"]]
                for r in ok[:4]:
                    print(f"  {r['id']:42s} {r['us']:8.2f} us")
                if bad:
                    print(f"  {family}: {len(bad)} failed, e.g. {bad[0]['error'][:160]}")
            rows.append(dict(M=M, K=K, N=N, id="cublas_fp16", us=fp16))
    with open(f"{out_dir}/probe.json", "w") as f:
        json.dump(dict(gpu=info.to_dict(), copy_bw=bw, floors=floors, rows=rows), f, indent=1)
    print(f"probe done in {time.time() - t0:.0f}s")


if __name__ == "__main__":
    keys = [tuple(int(x) for x in k.split("x")) for k in sys.argv[3].split(",")] if len(sys.argv) > 3 else KEYS
    families = tuple(sys.argv[4].split(",")) if len(sys.argv) > 4 else FAMILIES
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 250, keys, families)
