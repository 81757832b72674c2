"""What the Gluon probes (gluon_ws.py, dqmma_rs.py) share: a config's output against A @ dequantize(W),
and the mask-edge smoke run of a config in a process of its own. Gluon has no interpreter, so these
checks on the GPU are the first time such a kernel computes; a barrier waited on with the wrong phase
hangs rather than fails, and a child process turns that into one config's timeout."""
import subprocess
import sys

import torch


def relative_error_of(launch, inputs) -> float:
    """The relative error against ``inputs.ref`` of what ``launch(a, packed, scales, out)`` (a callable
    returning the kernel's no-argument launch) writes; NaN where it leaves any of C unwritten."""
    from tunesearch.bench import relative_error

    M, N = inputs.ref.shape
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    launch(inputs.a, inputs.packed, inputs.scales, out)()
    torch.cuda.synchronize()
    return relative_error(out, inputs.ref)


def smoke(launch, shapes) -> str | None:
    """``launch`` on each (M, K, N) of ``shapes`` against A @ dequantize(W); None, or what went wrong."""
    from tunesearch.bench import REL_TOL, CheckInputs

    for M, K, N in shapes:
        err = relative_error_of(launch, CheckInputs(M, N, K, 128, "cuda", seed=M + K + N))
        if not err < REL_TOL:
            return f"WRONG at M={M} K={K} N={N}: relative error {err:.3g}"
    return None


def smoke_in_child(script: str, fields, config: dict, timeout_s: float) -> str | None:
    """``python script --smoke v1,v2,...`` (the config's ``fields`` in order); None when it printed ok,
    else its last line, or HANG after ``timeout_s``."""
    arg = ",".join(str(config[k]) for k in fields)
    try:
        run = subprocess.run([sys.executable, script, "--smoke", arg], capture_output=True, text=True,
                             timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"HANG: no result in {timeout_s} s"
    if run.returncode != 0:
        return (run.stdout.strip().splitlines() or run.stderr.strip().splitlines() or ["failed"])[-1][:200]
    return None
