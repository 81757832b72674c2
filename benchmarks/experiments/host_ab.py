"""EXPERIMENT (NOTES.md row 72): the Gluon launcher with its TMA descriptors encoded once per operand address
(``api._EncodedDescriptors``), with only the weights' kept (A's encoded every call), and with all three
encoded every call (the launcher before), on one GPU host, alternating.

    python benchmarks/experiments/host_ab.py OUT_DIR [ROUNDS]   (on an sm_90 GPU)

Each round times, in each form: the host time of ``mm`` a call on every llama-7b shape at M=1 (the packaged
table's picks, ``benchmark.python_overhead_us``: 2000 calls, beside Triton's own launch), and eager greedy
decode (no CUDA graph) of an 8-block random 7B-shaped model at batch 1, fp16 against W4A16
(``decode.decode_benchmark``, 32 tokens). Host time drifts on a shared host, so the forms alternate and
each is compared with Triton's launch timed in the same process. Writes OUT_DIR/host_ab.json.
"""
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # so that it runs as a script from anywhere

import tunesearch.variants.api as api  # noqa: E402

ENCODE_ONCE = api._EncodedDescriptors.__dict__["of"]  # the classmethod itself: the forms replace it


class WeightsOnly(api._EncodedDescriptors):
    """A's descriptor encoded every call, as the first form of row 72 did."""

    of = ENCODE_ONCE

    def arguments(self, a, packed, scales):
        self.encoded_a.clear()
        return super().arguments(a, packed, scales)


FORMS = {"once": ENCODE_ONCE, "weights_once": classmethod(lambda cls, run, boxes: WeightsOnly.of(run, boxes)),
         "every_call": classmethod(lambda cls, run, boxes: None)}


def main(out_dir, rounds=2):
    from tunesearch import load_dispatch
    from tunesearch.benchmark import python_overhead_us
    from tunesearch.decode import DecoderConfig, decode_benchmark, random_decoder
    from tunesearch.gpu import gpu_info
    from tunesearch.shapes import parse_shapes

    model = random_decoder(DecoderConfig(4096, 11008, 32, 8, 32000, max_len=64), device="cuda")
    rows = []
    for r in range(rounds):
        for form, of in FORMS.items():
            api._EncodedDescriptors.of = of
            mm = load_dispatch()  # fresh launchers
            for K, N in parse_shapes("llama-7b"):
                row = dict(round=r, form=form, K=K, N=N, **python_overhead_us(mm, K, N, M=1))
                rows.append(row)
                print(f"{form} {K}x{N}: mm {row['dispatch']:.1f} us, Triton's launch {row['triton_launch']:.1f}",
                      flush=True)
            (dec,) = decode_benchmark(model, load_dispatch(), batches=(1,), new_tokens=32, prompt_len=16,
                                      graph=False, repeats=3)
            rows.append(dict(round=r, form=form, decode_eager=dec.to_dict()))
            print(f"{form} eager decode batch 1: fp16 {dec.fp16_ms_per_step:.3f} ms/step, int4 "
                  f"{dec.int4_ms_per_step:.3f} ({dec.speedup:.2f}x)", flush=True)
            with open(f"{out_dir}/host_ab.json", "w") as f:
                json.dump(dict(gpu=gpu_info(0).to_dict(), torch=torch.__version__, rows=rows), f, indent=1)
    print(f"{'form':>11} {'mm us (median over shapes)':>27} {'mm / Triton launch':>19} {'eager int4 ms/step':>19}")
    for form in FORMS:
        host = sorted(x["dispatch"] for x in rows if x.get("form") == form and "dispatch" in x)
        ratio = sorted(x["dispatch"] / x["triton_launch"] for x in rows if x.get("form") == form and "dispatch" in x)
        dec = [x["decode_eager"]["int4_ms_per_step"] for x in rows if x.get("form") == form and "decode_eager" in x]
        print(f"{form:>11} {host[len(host) // 2]:27.1f} {ratio[len(ratio) // 2]:19.3f} "
              f"{' / '.join(f'{d:.3f}' for d in dec):>19}")


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:3]))
