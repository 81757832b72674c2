"""What the Gluon probes (gluon_ws.py, dqmma_rs.py, the *_ab.py A/Bs) share: a config's output against
A @ dequantize(W), the mask-edge smoke run of a config in a process of its own (and of many, in parallel),
the offline sm_90 compile of a kernel with the TMA families' signature, the command line of the experiments
whose kernel takes a config string, and the packaged H200 table's picks (or an environment's keys) to
time. Gluon has no interpreter, so these checks on the GPU are the first time such a kernel computes; a
barrier waited on with the wrong phase hangs rather than fails, and a child process turns that into one
config's timeout."""
import json
import subprocess
import sys
from pathlib import Path

import torch

TABLE = Path(__file__).resolve().parents[2] / "tunesearch" / "tables" / "h200.json"


def packaged_picks(ms, family: str | None = None):
    """(M, K, N, layout, pick) for each llama-7b shape and M in ``ms``: the packaged H200 table's pick (of
    ``family`` only, where given) and the layout that table keeps the shape's weights in."""
    from tunesearch.dispatch import Dispatcher, read_table
    from tunesearch.shapes import parse_shapes

    cuda = torch.device("cuda")
    table = Dispatcher(read_table(TABLE), strict=True)
    for K, N in parse_shapes("llama-7b"):
        layout = table.layout_for(N, K, cuda)
        for M in ms:
            pick = table.resolve(M, N, K, cuda)
            if pick is not None and (family is None or pick.family == family):
                yield M, K, N, layout, pick


def env_keys(name: str, default):
    """The (M, K, N) keys environment variable ``name`` names, "M,K,N;M,K,N;...", else ``default``."""
    import os

    return [tuple(int(x) for x in key.split(",")) for key in os.environ.get(name, "").split(";") if key] or default


def relative_error_of(launch, inputs) -> float:
    """The relative error against ``inputs.ref`` of what ``launch(a, packed, scales, out)`` (a callable
    returning the kernel's no-argument launch) writes; NaN where it leaves any of C unwritten."""
    from tunesearch.bench import relative_error

    M, N = inputs.ref.shape
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    launch(inputs.a, inputs.packed, inputs.scales, out)()
    torch.cuda.synchronize()
    return relative_error(out, inputs.ref)


def time_form(row: dict, form: str, launch, inputs, copies, must_be_right: bool = True):
    """One form of an experiment's row: ``launch`` checked against ``inputs.ref`` (``row[form +
    "_rel_error"]``), then graph-replayed over the operand ``copies`` (``row[form]``, us). A form that
    fails, or is wrong where it ``must_be_right``, records why in ``row[form]`` instead: one form's
    failure is a result, not the run's end."""
    from tunesearch.bench import REL_TOL, graph_time

    try:
        row[f"{form}_rel_error"] = err = relative_error_of(launch, inputs)
        if must_be_right and not err < REL_TOL:
            raise AssertionError(f"WRONG: relative error {err:.3g}")
        row[form] = graph_time([launch(*c) for c in copies], replays=20).us
    except Exception as e:
        row[form] = f"{type(e).__name__}: {str(e)[:300]}"


def smoke(launch, shapes) -> str | None:
    """``launch`` on each (M, K, N) of ``shapes`` against A @ dequantize(W); None, or what went wrong."""
    from tunesearch.bench import REL_TOL, CheckInputs

    for M, K, N in shapes:
        err = relative_error_of(launch, CheckInputs(M, N, K, 128, "cuda", seed=M + K + N))
        if not err < REL_TOL:
            return f"WRONG at M={M} K={K} N={N}: relative error {err:.3g}"
    return None


def frag32_smoke(launch, shapes) -> str | None:
    """``smoke`` of a ``launch`` that reads frag32 weights: each shape's weights packed in the base layout and
    repacked (as the table's ``prepare`` does)."""
    from tunesearch.variants.layout import to_layout

    return smoke(lambda a, packed, scales, out: launch(a, to_layout(packed, "frag32"), scales, out), shapes)


def kernel_launch(kernel, launch_args):
    """The launch form these checks take, (a, packed, scales, out) -> a no-argument launch returning out, of
    ``kernel`` whose ``launch_args(a, packed, scales, out)`` gives (grid, args, meta)."""
    def launch(a, packed, scales, out):
        grid, args, meta = launch_args(a, packed, scales, out)

        def run():
            kernel[grid](*args, **meta)
            return out
        return run
    return launch


def frag32_operands(M: int, N: int, K: int):
    """CPU tensors (a, packed, scales, out) of a launch at (M, N, K) on frag32 weights (G=128), for the
    launch builders of an offline compile: those the sweep's compile pool builds its kernels for."""
    from tunesearch.compile import empty_operands

    return empty_operands(M, N, K, 128, "frag32", device="cpu")


def compile_frag32_offline(kernel, launch_args, M: int, N: int, K: int):
    """``kernel`` (``compile_tma_kernel``'s signature) compiled for sm_90 without a GPU at (M, N, K) on frag32
    weights, its descriptors made of CPU tensors; ``launch_args`` as ``kernel_launch`` takes it."""
    _, args, meta = launch_args(*frag32_operands(M, N, K))
    descriptors = sum(name.endswith("_desc") for name in kernel.arg_names)  # the arguments' first
    consts = {name: meta[name] for name in kernel.arg_names if name in meta}
    return compile_tma_kernel(kernel, args[:descriptors], consts, meta["num_warps"], meta["maxnreg"])


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


def smoke_all(script: str, fields, configs, config_id, workers: int = 8, timeout_s: float = 120) -> dict:
    """Each config's smoke run (``script --smoke``, ``smoke_in_child``) in a child process of its own (a
    barrier waited on with the wrong phase hangs rather than fails: a hang must cost one config, not the
    device call), ``workers`` at a time, reported; {config_id(config): what went wrong} of those that failed."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        problems = pool.map(lambda config: smoke_in_child(script, fields, config, timeout_s), configs)
    bad = {config_id(c): problem for c, problem in zip(configs, problems) if problem}
    print(f"smoke: {len(configs) - len(bad)} of {len(configs)} configs right on the mask edges"
          + "".join(f"\n  {k}: {v}" for k, v in bad.items()), flush=True)
    return bad


def config_cli(argv, parse_config, smoke, compile_offline, main):
    """The command line of an experiment whose kernel takes a config string (rsmma_two_tiles.py,
    rsmma_three_tiles.py): ``--smoke CONFIG`` prints ok or what went wrong and exits 1 then (what
    ``smoke_in_child`` reads); ``--compile CONFIG`` prints the offline sm_90 schedule as JSON (shared bytes,
    the wgmma waits, registers, spills); else ``main(OUT_DIR)``."""
    if argv[1] == "--smoke":
        problem = smoke(parse_config(argv[2]))
        print(problem or "ok")
        sys.exit(1 if problem else 0)
    elif argv[1] == "--compile":
        from benchmarks.sass_stats import disassemble, resources, wgmma_waits

        compiled = compile_offline(parse_config(argv[2]))
        print(json.dumps(dict(shared=compiled.metadata.shared, waits=wgmma_waits(disassemble(compiled)),
                              **resources(compiled))))
    else:
        main(argv[1])


def compile_tma_kernel(kernel, descriptors, consts: dict, num_warps: int, maxnreg: int):
    """``kernel``, with the Gluon families' signature (a_desc, p_desc, s_desc, c_ptr, ws_ptr, lock_ptr, M, N,
    K, stride_cm, stride_cn, then constexprs), compiled for sm_90 without a GPU: the pointers, N, K and
    C's row stride marked divisible by 16 and C's column stride 1, as a launch at llama shapes specializes
    them. ``descriptors``: the TMA descriptors (of CPU tensors will do), for the kernel's parameters named
    ``*_desc`` in order (three for the families; rsmma_two_tiles.py's kernel takes A as two)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type

    names = kernel.arg_names
    types = {name: mangle_type(d) for name, d in zip([n for n in names if n.endswith("_desc")], descriptors)}
    types |= dict(c_ptr="*fp16", ws_ptr="*fp32", lock_ptr="*i32", M="i32", N="i32", K="i32", stride_cm="i32")
    signature = {name: types.get(name, "constexpr") for name in names}
    divisible = [names.index(n) for n in ("c_ptr", "ws_ptr", "lock_ptr", "N", "K", "stride_cm")]
    src = GluonASTSource(kernel, signature, constexprs={**consts, "stride_cn": 1},
                         attrs={(i,): [["tt.divisibility", 16]] for i in divisible})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps, maxnreg=maxnreg))
