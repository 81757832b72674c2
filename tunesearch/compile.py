"""Compile variants ahead of timing, in parallel on the host's CPU cores.

Triton compilation, not timing, dominates a naive sweep (about a second per variant). Worker
processes compile each variant for the exact argument shapes of the real call, weights in the key's
layout included (so Triton's specialization and cache key match: frag32 weights are [K/32, 4N], and a
family that reads only frag32 does not compile on base-shaped ones), and leave the binaries in Triton's
on-disk cache, where the timing process then finds them.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor

_worker_device = 0


def _init_worker(device: int) -> None:
    global _worker_device
    _worker_device = device


def empty_operands(M: int, N: int, K: int, group_size: int, layout: str = "base", device="cuda"):
    """Uninitialized (a, packed, scales, out) of a call at (M, N, K, G) on weights in ``layout``: what a
    compile needs (shapes, dtypes, alignment), not values."""
    import torch

    from tunesearch.variants.layout import packed_shape

    return (torch.empty(M, K, dtype=torch.float16, device=device),
            torch.empty(packed_shape(K, N, layout), dtype=torch.int32, device=device),
            torch.empty(K // group_size, N, dtype=torch.float16, device=device),
            torch.empty(M, N, dtype=torch.float16, device=device))


def compile_one(variant_id: str, M: int, N: int, K: int, group_size: int, layout: str = "base",
                device: int = None):
    """Compile one variant for (M, N, K, G) on weights in ``layout``; returns None or the compile error's
    text."""
    import torch

    from tunesearch.variants import Variant
    from tunesearch.variants.api import launch

    device = _worker_device if device is None else device
    try:
        with torch.cuda.device(device):
            a, packed, scales, out = empty_operands(M, N, K, group_size, layout)
            launch(Variant.from_id(variant_id), a, packed, scales, out, group_size, warmup=True)
        return None
    except Exception as exc:  # a variant that fails to compile is a failed trial, not a crash
        return f"{type(exc).__name__}: {exc}"[:2000]


class Compiler:
    """A pool of compile workers, kept for the life of a sweep."""

    def __init__(self, device: int, workers: int | None = None):
        workers = workers or max(1, min(16, (os.cpu_count() or 2) - 1))
        ctx = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                         initargs=(device,))
        self.workers = workers

    def compile(self, variant_ids, M, N, K, group_size, layout: str = "base") -> dict[str, str | None]:
        ids = list(dict.fromkeys(variant_ids))
        futures = {vid: self._pool.submit(compile_one, vid, M, N, K, group_size, layout) for vid in ids}
        return {vid: fut.result() for vid, fut in futures.items()}

    def close(self):
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
