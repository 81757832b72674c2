# On the device (after `. benchmarks/device_setup.sh`): `tunesearch bench` at the M list M with one of the
# dispatch's module settings (KNOB) at A, then B, then A again in the same call (the drift's control is the
# rows whose plans both settings share), no peers; writes $OUT/bench_${TAG}_{a1,b,a2}.{json,log} and prints a
# row a key: the three times, fp16's mean, both settings' ratios to it, the launches under A and B.
#   KNOB=MAX_LAUNCHES A=3 B=2 TAG=launches M=1025,1300,1538,1569,1700,2306,3586   (NOTES.md row 116;
#       _s60's run is bench_launches{3a,2,3b}_h200_2026-12-04_s60.*)
#   KNOB=LARGEST_FIRST A=True B=False TAG=order M=1025,1100,1300,769,513,257,1700,2306   (row 119;
#       bench_order{1a,0,1b}_h200_2026-12-04_s60.*)
#   KNOB=CONCURRENT A='"auto"' B=False TAG=concurrent_auto M=260,288,520,576,1028,1290,1344,2050,2060,2600,3080,3100
#       (row 121's held-out M; bench_concurrent_auto{a,0,b}_h200_2026-12-04_s61.*: A=True against False at
#       row 116's M before it, bench_concurrent_{same_priority,priority}{a,0,b}_…_s61.*)
#   KNOB=table A=tunesearch/tables/h100.json B=tunesearch/tables/h200.json TAG=tables_h100
#       M=1,2,4,8,16,32,64,128,256,512,1024,4096: A and B are dispatch tables (NOTES.md plan item 3: the H100's
#       table against the H200's on an H100, whose picks it ran before _s71; _s72's run is
#       ab_tables_h100_2026-12-06_s72.txt)
#   KNOB=benchmark.BENCH_TIMINGS A=3 B=1 TAG=best_of M=1,2,4,8,16,32,64   (NOTES.md row 131: the least of
#       three graph timings of each timed thing against one; _s73's run is ab_best_of_h100_2026-12-06_s73.txt)
: "${KNOB:?}" "${A:?}" "${B:?}" "${TAG:?}" "${M:?}"
with() {
  if [ "$KNOB" = table ]; then tunesearch "${@:2}" --dispatch "$1"; return; fi
  # KNOB names a setting of tunesearch.dispatch, or MODULE.NAME of another tunesearch module
  # (benchmark.BENCH_TIMINGS)
  python -c "import importlib, sys; mod, _, name = '$KNOB'.rpartition('.')
module = importlib.import_module('tunesearch.' + (mod or 'dispatch'))
getattr(module, name)  # a misspelt setting is an error, not a new attribute that nothing reads
setattr(module, name, $1)
from tunesearch.cli import app; sys.argv[0] = 'tunesearch'; app()" "${@:2}"
}
for run in a1:$A b:$B a2:$A; do
  with "${run#*:}" bench --shapes "${SHAPES:-llama-7b}" --m "$M" --no-peers --plot '' --out "$OUT/bench_${TAG}_${run%%:*}.json" \
    > "$OUT/bench_${TAG}_${run%%:*}.log" 2>&1 || exit 1
done
python - <<'PY'
import json, os
out, tag = os.environ["OUT"], os.environ["TAG"]
runs = {k: {(r["K"], r["N"], r["M"]): r for r in json.load(open(f"{out}/bench_{tag}_{k}.json"))["rows"]}
        for k in ("a1", "b", "a2")}
print(f"{'key':>18} {'A':>8} {'B':>8} {'A':>8} {'fp16':>8} {'A/16':>6} {'B/16':>6} launches A, B")
for key, a1 in runs["a1"].items():
    b, a2 = runs["b"][key], runs["a2"][key]
    fp16 = (a1["fp16_us"] + b["fp16_us"] + a2["fp16_us"]) / 3
    a = (a1["tunesearch_us"] + a2["tunesearch_us"]) / 2
    print(f"{'M=%d %dx%d' % (key[2], key[0], key[1]):>18} {a1['tunesearch_us']:8.1f} {b['tunesearch_us']:8.1f} "
          f"{a2['tunesearch_us']:8.1f} {fp16:8.1f} {a / fp16:6.3f} {b['tunesearch_us'] / fp16:6.3f} "
          f"{a1['variant'].count(' + ') + 1}, {b['variant'].count(' + ') + 1}"
          + ("" if a1["variant"] == b["variant"] else " (plans differ)"))
PY
