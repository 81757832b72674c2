"""Trials in a worker process, so that a variant which crashes the process or poisons the CUDA
context (an illegal address) is a failed trial, not the end of the sweep.

The driver talks to one worker per GPU over a pipe. When the worker dies, hangs past the trial
timeout, or reports an error that leaves the CUDA context unusable, the trial is recorded as
failed with that error, the worker is replaced, and the current key is prepared again.

Test hook: ``TUNESEARCH_TEST_FAULTS="variant_id:exit,variant_id:cuda,variant_id:hang"`` makes the
worker die, raise a CUDA-style fatal error, or hang on those variants; ``variant_id:illegal`` (GPU
only) launches a real out-of-bounds store just before the variant runs, so the variant's trial
meets a genuine illegal-address error and a poisoned context. It exists for the fault tests.
"""
from __future__ import annotations

import multiprocessing
import os
import time

from .measure import Result

FATAL_CUDA = ("illegal memory access", "illegal address", "unspecified launch failure",
              "misaligned address", "an illegal instruction", "CUDA error: device-side assert",
              "cudaErrorLaunchFailure", "context is destroyed")
FAULTS_ENV = "TUNESEARCH_TEST_FAULTS"


class WorkerError(RuntimeError):
    """A setup step (prepare, fp16 baseline, release) failed inside the trial worker."""


def _faults() -> dict[str, str]:
    spec = os.environ.get(FAULTS_ENV, "")
    return dict(item.rsplit(":", 1) for item in spec.split(",") if ":" in item)


def _store_out_of_bounds(device):
    """TEST ONLY: poison the CUDA context with a real illegal-address fault (asynchronous: the
    next synchronizing call, inside the trial, reports it)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def store_far_away(ptr):
        tl.store(ptr + (1 << 40), 1.0)  # 4 TiB past a 4-byte allocation

    store_far_away[(1,)](torch.empty(1, device=f"cuda:{device}"))


def _serve(conn, kind: str, device, info, bandwidth):
    from .measure import GPUMeasurer, InterpreterMeasurer

    measurer = InterpreterMeasurer() if kind == "interpret" else GPUMeasurer(device, info, bandwidth)
    faults = _faults()
    while True:
        try:
            op, arg = conn.recv()
        except EOFError:
            return
        if op in ("prepare", "fp16", "release"):
            try:
                if op == "prepare":
                    conn.send(measurer.prepare(*arg))
                elif op == "fp16":
                    conn.send(measurer.fp16_us(*arg))
                else:
                    conn.send(measurer.release())
            except Exception as exc:  # the driver raises it, with the key, instead of a bare EOF
                conn.send(WorkerError(f"{type(exc).__name__}: {exc}"))
        elif op == "measure":
            from tunesearch.variants import Variant

            fault = faults.get(arg)
            if fault == "exit":
                os._exit(134)  # as a segfault or abort would
            if fault == "hang":
                time.sleep(3600)
            if fault == "illegal":
                _store_out_of_bounds(device)
            if fault == "cuda":
                result = Result("failed", "RuntimeError: CUDA error: an illegal memory access was encountered")
            else:
                result = measurer.measure(Variant.from_id(arg))
            conn.send(result)
            if result.error and any(s in result.error for s in FATAL_CUDA):
                return  # the context is unusable: let the driver start a fresh process
        elif op == "stop":
            return


class IsolatedMeasurer:
    """The measurer interface (prepare / fp16_us / measure / release), run in a worker process."""

    def __init__(self, kind: str, info, copy_bandwidth: float, device=None, trial_timeout: float = 300):
        self.kind, self.info, self.copy_bandwidth, self.device = kind, info, copy_bandwidth, device
        self.trial_timeout = trial_timeout
        self.restarts = 0
        self._key = None
        self._ctx = multiprocessing.get_context("spawn")
        self._proc = self._conn = None

    def _start(self):
        parent, child = self._ctx.Pipe()
        self._proc = self._ctx.Process(target=_serve, args=(child, self.kind, self.device, self.info,
                                                            self.copy_bandwidth), daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        if self._key is not None:
            self._call("prepare", self._key)

    def _stop(self, kill: bool = False):
        if self._proc is None:
            return
        if kill and self._proc.is_alive():
            self._proc.kill()
        self._proc.join(timeout=30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()
        self._proc = self._conn = None

    def _call(self, op, arg=None, timeout=None):
        if self._proc is None:
            self._start()
        self._conn.send((op, arg))
        if not self._conn.poll(timeout):
            raise TimeoutError(f"worker gave no answer to {op} within {timeout:.0f} s")
        answer = self._conn.recv()
        if isinstance(answer, WorkerError):
            raise WorkerError(f"{op} {arg} failed in the trial worker: {answer}")
        return answer

    def prepare(self, M, N, K, G, layout="base"):
        self._key = (M, N, K, G, layout)
        if self._proc is None:
            self._start()
        else:
            self._call("prepare", self._key)

    def fp16_us(self, M, N, K) -> float:
        return self._call("fp16", (M, N, K))

    def measure(self, variant) -> Result:
        try:
            result = self._call("measure", variant.id, timeout=self.trial_timeout)
        except (EOFError, ConnectionError, OSError, TimeoutError) as exc:
            proc = self._proc
            if isinstance(exc, TimeoutError):
                why = f"timed out after {self.trial_timeout:.0f} s"
            else:
                if proc is not None:  # the pipe's EOF can come before the dead process is reaped
                    proc.join(timeout=10)
                why = f"worker process died (exit code {proc.exitcode if proc is not None else None})"
            self._restart(kill=True)
            return Result("failed", f"{why} while running {variant.id}; worker restarted")
        if result.error and any(s in result.error for s in FATAL_CUDA):
            self._restart(kill=False)
            result = Result(result.status, result.error + " [CUDA context lost; worker restarted]",
                            result.us, result.spread, result.rel_error)
        return result

    def _restart(self, kill: bool):
        self._stop(kill=kill)
        self.restarts += 1
        self._start()

    def release(self):
        if self._proc is not None:
            self._call("release")
        self._key = None

    def close(self):
        if self._proc is not None:
            try:
                self._conn.send(("stop", None))
            except OSError:
                pass
            self._stop()
