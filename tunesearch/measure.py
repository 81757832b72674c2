"""Measurers: what a trial is run by. The GPU one times for real; the interpreter one is a
test-only stand-in so the whole pipeline can run in CI without a GPU (its 'timings' are
interpreter wall times and mean nothing)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from tunesearch.variants import Variant

from .bench import REL_TOL, CheckInputs, Operands, kernel_bytes, time_fp16, time_variant


@dataclass
class Result:
    status: str  # ok | failed | wrong
    error: str | None = None
    us: float | None = None
    spread: float | None = None
    rel_error: float | None = None


def _run(check, timer) -> Result:
    try:
        err = check()
    except Exception as exc:
        return Result("failed", f"{type(exc).__name__}: {exc}"[:4000])
    if not err < REL_TOL:
        return Result("wrong", f"relative max error {err:.3g} >= {REL_TOL}", rel_error=err if math.isfinite(err) else None)
    try:
        us, spread = timer()
    except Exception as exc:
        return Result("failed", f"{type(exc).__name__}: {exc}"[:4000])
    return Result("ok", None, us, spread, err)


class GPUMeasurer:
    def __init__(self, device: int, info, copy_bandwidth: float, replays: int = 20):
        self.device, self.info, self.copy_bandwidth, self.replays = device, info, copy_bandwidth, replays
        self.key = None

    def prepare(self, M, N, K, G, layout="base"):
        torch.cuda.set_device(self.device)
        self.key = (M, N, K, G, layout)
        self.inputs = CheckInputs(M, N, K, G, "cuda", layout=layout)
        # the inputs' temporaries (GBs at llama sizes) handed back before anything is timed: a kernel timed
        # just after they were mapped ran 6-13% slow at 4096x22016 on an H100 (NOTES.md rows 130-131)
        torch.cuda.empty_cache()
        self.operands = Operands(M, N, K, G, self.info.l2_bytes, layout=layout)

    def fp16_us(self, M, N, K) -> float:
        return time_fp16(M, N, K, self.info.l2_bytes, self.replays).us

    def measure(self, variant: Variant) -> Result:
        def timer():
            t = time_variant(variant, self.operands, self.replays)
            return t.us, t.spread

        return _run(lambda: self.inputs.check(variant), timer)

    def release(self):
        self.inputs = self.operands = None
        torch.cuda.empty_cache()


class InterpreterMeasurer:
    """TEST ONLY: runs the kernels in Triton's interpreter; 'us' is interpreter wall time."""

    copy_bandwidth = 1e9

    def __init__(self):
        self.info = self.test_info()
        self.device = None

    @staticmethod
    def test_info():
        from .gpu import GPUInfo

        return GPUInfo(index=0, name="interpreter-test", capability="0.0", sm_count=1,
                       l2_bytes=0, memory_bytes=0, driver="none", torch_version=torch.__version__,
                       triton_version=__import__("triton").__version__,
                       tunesearch_version=__import__("tunesearch").__version__,
                       datasheet_bandwidth=None)

    def prepare(self, M, N, K, G, layout="base"):
        self.key = (M, N, K, G, layout)
        self.inputs = CheckInputs(M, N, K, G, "cpu", layout=layout)

    def fp16_us(self, M, N, K) -> float:
        a, w = torch.randn(M, K).half(), torch.randn(K, N).half()
        t = time.perf_counter()
        a.float() @ w.float()
        return (time.perf_counter() - t) * 1e6

    def measure(self, variant: Variant) -> Result:
        elapsed = {}

        def check():
            t = time.perf_counter()
            err = self.inputs.check(variant)
            elapsed["us"] = (time.perf_counter() - t) * 1e6
            return err

        return _run(check, lambda: (elapsed["us"], 0.0))

    def release(self):
        self.inputs = None


def metrics(M, N, K, G, us, copy_bandwidth, fp16_us):
    nbytes = kernel_bytes(M, N, K, G)
    gbps = nbytes / (us * 1e-6) / 1e9
    return dict(gbps=gbps, roofline_frac=gbps * 1e9 / copy_bandwidth,
                tflops=2 * M * N * K / (us * 1e-6) / 1e12,
                speedup_fp16=(fp16_us / us) if fp16_us else None)
