# On the device (after `. benchmarks/device_setup.sh`): the dispatch's three-launch plans (NOTES.md row 116)
# against the same table's two-launch plans, same call, alternated (three, two, three), at M where the plans
# differ and at M where they do not (the drift's control). Writes $OUT/bench_launches{3a,2,3b}.{json,log}.
M=${M:-1025,1300,1538,1569,1700,2306,3586}
two() { python -c "import sys, tunesearch.dispatch as d; d.MAX_LAUNCHES = 2; from tunesearch.cli import app; sys.argv[0] = 'tunesearch'; app()" "$@"; }
tunesearch bench --m "$M" --no-peers --plot '' --out "$OUT/bench_launches3a.json" > "$OUT/bench_launches3a.log" 2>&1 || exit 1
two bench --m "$M" --no-peers --plot '' --out "$OUT/bench_launches2.json" > "$OUT/bench_launches2.log" 2>&1 || exit 1
tunesearch bench --m "$M" --no-peers --plot '' --out "$OUT/bench_launches3b.json" > "$OUT/bench_launches3b.log" 2>&1 || exit 1
python - <<'PY'
import json, os
out = os.environ["OUT"]
runs = {k: {(r["K"], r["N"], r["M"]): r for r in json.load(open(f"{out}/bench_launches{k}.json"))["rows"]}
        for k in ("3a", "2", "3b")}
print(f"{'key':>18} {'3a':>8} {'2':>8} {'3b':>8} {'fp16':>8} {'x16 3':>6} {'x16 2':>6}  plan (3) / plan (2)")
for key, r3 in runs["3a"].items():
    r2, r3b = runs["2"][key], runs["3b"][key]
    three = (r3["tunesearch_us"] + r3b["tunesearch_us"]) / 2
    fp16 = (r3["fp16_us"] + r2["fp16_us"] + r3b["fp16_us"]) / 3
    same = "=" if r3["variant"] == r2["variant"] else "*"
    print(f"{'M=%d %dx%d' % (key[2], key[0], key[1]):>18} {r3['tunesearch_us']:8.1f} {r2['tunesearch_us']:8.1f} "
          f"{r3b['tunesearch_us']:8.1f} {fp16:8.1f} {three / fp16:6.3f} {r2['tunesearch_us'] / fp16:6.3f} {same}")
PY
