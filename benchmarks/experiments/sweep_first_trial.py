"""Does the sweep's first trial of a key pay the slow first timing? (NOTES.md row 131)

    python benchmarks/experiments/sweep_first_trial.py OUT

In a resumed sweep (the fp16 baseline stored, so not timed) a key's first trial is timed just after
GPUMeasurer.prepare made the check's inputs, whose temporaries map GBs; sweep_vs_bench.py timed 4096x22016
M=1's pick that way at 22.0 us in 3 of 6 rounds against 19.5 alone. prepare now hands those temporaries back
(empty_cache) before making the Operands. Here each key's pick is measured three times in a row after
prepare, two ways in alternate rounds: `now` (prepare as it is) and `before` (the inputs, then the Operands,
no empty_cache between: prepare before row 131). Prints the three times a round; writes
OUT/sweep_first_trial.json."""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # so that it runs as a script from anywhere

from tunesearch import load_dispatch  # noqa: E402
from tunesearch.bench import CheckInputs, Operands  # noqa: E402
from tunesearch.gpu import gpu_info, measure_copy_bandwidth  # noqa: E402
from tunesearch.measure import GPUMeasurer  # noqa: E402

KEYS = [(4096, 22016, 1), (4096, 22016, 2), (4096, 22016, 8), (4096, 22016, 32), (4096, 12288, 1),
        (4096, 12288, 8), (4096, 11008, 1)]
G = 128


def prepare_before(meas, M, N, K, layout):
    """GPUMeasurer.prepare as it was before row 131."""
    meas.inputs = CheckInputs(M, N, K, G, "cuda", layout=layout)
    meas.operands = Operands(M, N, K, G, meas.info.l2_bytes, layout=layout)


def main(out):
    info = gpu_info(0)
    meas = GPUMeasurer(0, info, measure_copy_bandwidth(0))
    mm = load_dispatch()
    dev = torch.device("cuda")
    report = []
    for rnd in range(4):
        mode = ("before", "now")[rnd % 2]
        for K, N, M in KEYS:
            layout = mm.layout_for(N, K, dev)
            (_, variant), = mm.plan(M, N, K, dev, layout)
            if mode == "now":
                meas.prepare(M, N, K, G, layout)
            else:
                prepare_before(meas, M, N, K, layout)
            times = [meas.measure(variant).us for _ in range(3)]
            meas.release()
            report.append(dict(round=rnd, mode=mode, K=K, N=N, M=M, variant=variant.id, times=times,
                               table_us=mm.table_us(M, N, K, dev, layout)))
            print(f"{rnd} {mode:>6} {K}x{N} M={M:<3} table {report[-1]['table_us']:5.1f}  "
                  + " ".join(f"{t:5.1f}" for t in times), flush=True)
    json.dump(dict(gpu=info.to_dict(), rows=report), open(f"{out}/sweep_first_trial.json", "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
