"""GPU identity and ceilings: what a trial was measured on, and the roofline denominators."""
from __future__ import annotations

import statistics
import subprocess
from dataclasses import asdict, dataclass

import torch
import triton
import triton.language as tl

import tunesearch

# Datasheet memory bandwidth (bytes/s), kept beside the measured figure for reference only.
DATASHEET_BANDWIDTH = {
    "NVIDIA H200": 4.8e12,
    "NVIDIA H100 80GB HBM3": 3.35e12,
    "NVIDIA H100 PCIe": 2.0e12,
    "NVIDIA A100-SXM4-80GB": 2.039e12,
    "NVIDIA A100-SXM4-40GB": 1.555e12,
    "NVIDIA A100 80GB PCIe": 1.935e12,
    "NVIDIA L40S": 0.864e12,
    "NVIDIA GeForce RTX 4090": 1.008e12,
}


class NoGPUError(RuntimeError):
    pass


@dataclass(frozen=True)
class GPUInfo:
    index: int
    name: str
    capability: str  # "9.0"
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    driver: str
    torch_version: str
    triton_version: str
    tunesearch_version: str
    datasheet_bandwidth: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise NoGPUError("no CUDA GPU is visible (torch.cuda.is_available() is False); "
                         "sweeps and benchmarks need one")


def resolve_devices(spec: str) -> list[int]:
    """``auto`` -> the current device, ``N`` -> device N, ``all`` -> every visible device."""
    require_cuda()
    count = torch.cuda.device_count()
    spec = str(spec).strip().lower()
    if spec == "auto":
        return [torch.cuda.current_device()]
    if spec == "all":
        names = {torch.cuda.get_device_name(i) for i in range(count)}
        if len(names) > 1:
            raise ValueError(f"--gpu all needs one GPU model, found {sorted(names)}")
        return list(range(count))
    if spec.isdigit() and int(spec) < count:
        return [int(spec)]
    raise ValueError(f"--gpu must be auto, all or a device index below {count}, got {spec!r}")


def _driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpu_info(index: int) -> GPUInfo:
    require_cuda()
    props = torch.cuda.get_device_properties(index)
    return GPUInfo(
        index=index, name=props.name, capability=f"{props.major}.{props.minor}",
        sm_count=props.multi_processor_count, l2_bytes=int(props.L2_cache_size),
        memory_bytes=int(props.total_memory), driver=_driver_version(),
        torch_version=torch.__version__, triton_version=triton.__version__,
        tunesearch_version=tunesearch.__version__,
        datasheet_bandwidth=DATASHEET_BANDWIDTH.get(props.name),
    )


def measure_copy_bandwidth(device: int, nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read plus bytes written."""
    with torch.cuda.device(device):
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 255)
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        del src, dst
        return 2 * nbytes / statistics.median(times)


@triton.jit
def _stream_read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Read ``n`` int32 once and reduce them: the floor of any kernel that streams its weights."""
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(pid * BLOCK, n, step):
        offs = start + tl.arange(0, BLOCK)
        acc ^= tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), acc)


def stream_read_floor(nbytes: int, l2_bytes: int, sm_count: int, replays: int = 30, kernel=None, **options):
    """Time a bare streaming read of ``nbytes``, graph-replayed over copies rotated past L2.

    Returns the Timing of the best of a few grid sizes: the reachable floor for one kernel that
    must read that many bytes (launch and ramp included). ``kernel`` (default ``_stream_read_kernel``)
    and launch ``options`` are for experiments that time another form of it on the same grids.
    """
    from .bench import copies_to_defeat_l2, graph_time

    kernel = kernel or _stream_read_kernel
    n = max(1, nbytes // 4)
    copies = [torch.randint(0, 2**31 - 1, (n,), dtype=torch.int32, device="cuda")
              for _ in range(copies_to_defeat_l2(nbytes, l2_bytes))]
    best = None
    for block, per_sm, warps in ((1024, 4, 4), (2048, 4, 8), (1024, 8, 4), (4096, 2, 8)):
        grid = sm_count * per_sm
        out = torch.empty(grid * block, dtype=torch.int32, device="cuda")
        timing = graph_time([lambda x=x: kernel[(grid,)](x, out, n, BLOCK=block, num_warps=warps, **options)
                             for x in copies], replays)
        if best is None or timing.us < best.us:
            best = timing
    return best
