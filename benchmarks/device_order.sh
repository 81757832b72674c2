# On the device (after `. benchmarks/device_setup.sh`): a split call's launches most rows first (the last, of
# few rows, reading the weights from L2) against A's order, same call, alternated (largest first, A's order,
# largest first), at M whose plans hold a launch of few rows (NOTES.md row 119). $OUT/bench_order{1a,0,1b}.*
M=${M:-1025,1100,1300,769,513,257,1700,2306}
order() { python -c "import sys, tunesearch.dispatch as d; d.LARGEST_FIRST = $1; from tunesearch.cli import app; sys.argv[0] = 'tunesearch'; app()" "${@:2}"; }
order True bench --m "$M" --no-peers --plot '' --out "$OUT/bench_order1a.json" > "$OUT/bench_order1a.log" 2>&1 || exit 1
order False bench --m "$M" --no-peers --plot '' --out "$OUT/bench_order0.json" > "$OUT/bench_order0.log" 2>&1 || exit 1
order True bench --m "$M" --no-peers --plot '' --out "$OUT/bench_order1b.json" > "$OUT/bench_order1b.log" 2>&1 || exit 1
python - <<'PY'
import json, os
out = os.environ["OUT"]
runs = {k: {(r["K"], r["N"], r["M"]): r for r in json.load(open(f"{out}/bench_order{k}.json"))["rows"]}
        for k in ("1a", "0", "1b")}
print(f"{'key':>18} {'1a':>8} {'0':>8} {'1b':>8} {'fp16':>8} {'x16 1':>6} {'x16 0':>6} launches")
for key, r1 in runs["1a"].items():
    r0, r1b = runs["0"][key], runs["1b"][key]
    first = (r1["tunesearch_us"] + r1b["tunesearch_us"]) / 2
    fp16 = (r1["fp16_us"] + r0["fp16_us"] + r1b["fp16_us"]) / 3
    print(f"{'M=%d %dx%d' % (key[2], key[0], key[1]):>18} {r1['tunesearch_us']:8.1f} {r0['tunesearch_us']:8.1f} "
          f"{r1b['tunesearch_us']:8.1f} {fp16:8.1f} {first / fp16:6.3f} {r0['tunesearch_us'] / fp16:6.3f} "
          f"{r1['variant'].count(' + ') + 1}")
PY
