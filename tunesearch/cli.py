"""The command line: thin typer commands over the library."""
from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

app = typer.Typer(help="tunesearch: find the fastest W4A16 Triton kernel per (GPU, M, N, K).",
                  no_args_is_help=True, add_completion=False)
console = Console(stderr=True)

DB_HELP = "SQLAlchemy URL of the store (default: $TUNESEARCH_DB or sqlite:///tunesearch.db)"


def _fail(message: str, code: int = 2):
    console.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM (``timeout``, a batch system's stop) raises KeyboardInterrupt in here, as Ctrl-C does, so
    that a long command can say what it has done before it exits; the former handler is put back after."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        former = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, former)


def _open_store(db, create: bool = True):
    """The store --db names; ``create=False`` for commands that only read it (no empty store made)."""
    from tunesearch.db import Store, StoreError

    try:
        return Store(db, create=create)
    except StoreError as exc:
        _fail(str(exc))


def _parse_budget(text: Optional[str]) -> Optional[float]:
    if not text:
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    try:
        return float(t[:-1]) * units[t[-1]] if t[-1] in units else float(t)
    except (ValueError, IndexError):
        _fail(f"bad --time-budget {text!r}: use seconds or a suffix s/m/h, e.g. 15m")


class _Progress:
    """A rich progress bar per shape, with an ETA, fed by the sweep."""

    def __init__(self, settings):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TimeRemainingColumn(), console=console)
        self.tasks = {}
        self.ms = settings.all_ms
        self.layouts = set()
        self.trials = 0

    def start_key(self, key):
        shape = (key.k, key.n)
        if shape not in self.tasks:
            self.tasks[shape] = self.bar.add_task(f"{key.k}x{key.n}", total=len(self.ms))
        self.layouts.add(key.layout)  # each M is searched once per layout
        self.bar.update(self.tasks[shape], description=f"{key.k}x{key.n} M={key.m} {key.layout}",
                        total=len(self.ms) * len(self.layouts))

    def trial(self, record):
        self.trials += 1

    def end_key(self, key):
        self.bar.advance(self.tasks[(key.k, key.n)])

    def __enter__(self):
        self.bar.start()
        return self

    def __exit__(self, *exc):
        self.bar.stop()


GLUON_NEEDS = "Gluon needs an sm_90 GPU and a Triton with Gluon"


def _families_off(device: int) -> tuple[str, list[str]]:
    """(the GPU's name, the families it cannot run: the Gluon ones, unless it has what they need)."""
    from tunesearch.variants import DeviceLimits
    from tunesearch.variants.space import GLUON_FAMILIES

    limits = DeviceLimits.of(device)
    return limits.name, [] if limits.gluon else list(GLUON_FAMILIES)


def _families_line(name: str, off: list[str]) -> str:
    """Which kernel families the GPU ``name`` runs, ``off`` being those it cannot."""
    from tunesearch.variants import FAMILIES

    line = f"families on {name}: " + ", ".join(f for f in FAMILIES if f not in off)
    return line + (f" ({', '.join(off)} off: {GLUON_NEEDS})" if off else "")


@app.command()
def sweep(
    gpu: str = typer.Option("auto", help="auto (current device), a device index, or all"),
    shapes: str = typer.Option("llama-7b", help="a preset (llama-7b, llama-13b, llama3-8b, mistral-7b, llama-70b), a Llama-like model's config.json (or its folder) or KxN,KxN"),
    m: Optional[str] = typer.Option(None, "--m", help=(
        "M buckets, e.g. 1,4,16 (default: 1..4096, 30 buckets), or 'edges': each default bucket's smallest M "
        "alone (--edges sweeps them after the buckets)")),
    edges: Optional[bool] = typer.Option(None, "--edges/--no-edges", help=(
        "after the buckets, each bucket's smallest M too (the bucket below + 1), with a few trials, so that the "
        "export picks per bucket what holds over all of it (default: with the default buckets, not with --m)")),
    group_size: int = typer.Option(128, help="quantization group size along K"),
    trials: int = typer.Option(40, min=1, help="new trials per key (already-stored ones count)"),
    more: int = typer.Option(0, min=0, help="instead of --trials: this many trials per key beyond those it has "
                             "(timed with this code, of --families) when reached, after its 3 fastest are timed "
                             "again in this run; each run adds them again"),
    time_budget: Optional[str] = typer.Option(None, help="wall-time budget for the sweep, e.g. 900, 15m: each key "
                                               "searches for an equal share of what is left"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    fresh: bool = typer.Option(False, help="forget stored trials of these keys and measure again"),
    workers: Optional[int] = typer.Option(None, help="parallel compile workers (default: CPU cores - 1)"),
    seed: int = typer.Option(0, help="sampler seed"),
    trial_timeout: float = typer.Option(300.0, min=1.0, help="seconds before a hung trial is killed (its worker restarted)"),
    families: Optional[str] = typer.Option(None, help="search only these families, e.g. dqmma,swapab "
                                           "(re-tune one after a kernel change; the others' trials stay)"),
    layouts: Optional[str] = typer.Option(None, help="weight layouts to time each key in, e.g. base,frag32 "
                                          "(default: base, and frag32 on an sm_90 GPU); export keeps one a shape"),
    interpret_test: bool = typer.Option(False, hidden=True, help="TEST ONLY: interpreter, fake timings"),
):
    """Search every kernel variant family per (shape, M) with Optuna; every trial is stored."""
    from tunesearch.report import print_best
    from tunesearch.shapes import parse_ms, parse_shapes
    from tunesearch.sweep import (SweepSettings, is_current, run_sweep, run_sweep_all, sweep_layouts,
                                  untimed_keys)

    try:
        settings = SweepSettings(shapes=parse_shapes(shapes), ms=parse_ms(m), group_size=group_size,
                                 edges=(m is None) if edges is None else edges and (m or "").strip() != "edges",
                                 trials=trials, more=more, time_budget=_parse_budget(time_budget), fresh=fresh,
                                 workers=workers, seed=seed, interpret_test=interpret_test,
                                 trial_timeout=trial_timeout,
                                 families=None if families is None else
                                 tuple(f.strip() for f in families.split(",") if f.strip()),
                                 layouts=None if layouts is None else
                                 tuple(x.strip() for x in layouts.split(",") if x.strip()))
        for k, _ in settings.shapes:
            if k % group_size:
                raise ValueError(f"K={k} is not a multiple of --group-size {group_size}")
    except ValueError as exc:
        _fail(str(exc))
    store = _open_store(db)
    device = None
    if not interpret_test:
        from tunesearch.gpu import NoGPUError, resolve_devices

        try:
            devices = resolve_devices(gpu)
        except NoGPUError as exc:
            _fail(str(exc), 1)
        except ValueError as exc:
            _fail(str(exc))
        name, off = _families_off(devices[0])
        console.print(_families_line(name, off))
        if settings.families and set(settings.families) <= set(off):  # it would measure nothing, silently
            _fail(f"--families {','.join(settings.families)}: none of them runs on {name} ({GLUON_NEEDS})", 1)
        if len(devices) > 1:
            with _Progress(settings) as progress:
                results, unreached = run_sweep_all(store.url, settings, devices, progress)
            for dev, n, status, err in results:
                console.print(f"GPU {dev}: {n} trials, {status}" + (f": {err}" if err else ""))
            best = store.best_trials()
            print_best([t for t in best if (t.k, t.n) in settings.shapes and t.m in settings.all_ms],
                       "best per key", current=is_current)
            from tunesearch.variants import DeviceLimits

            _warn_untimed(untimed_keys(store, settings, name, sweep_layouts(settings, DeviceLimits.of(devices[0]))),
                          settings)
            _warn_unreached(unreached, settings)
            if any(status == "crashed" for _, _, status, _ in results):
                raise typer.Exit(1)
            return
        device = devices[0]
    with _Progress(settings) as progress:
        result = run_sweep(store, settings, device, progress)
    print_best(result.best, f"best per key on {result.gpu}", current=is_current)
    retimed = f", {result.retimed} stored ones timed again" if result.retimed else ""
    console.print(f"{result.trials_run} new trials{retimed} over {result.keys} keys in {result.wall_s:.0f} s "
                  f"({result.status}); store: {store.url}")
    _warn_untimed(result.untimed, settings)
    _warn_unreached(result.unreached, settings)


def _warn_untimed(keys, settings) -> None:
    """Name the sweep's keys that hold no trial of this code: the export leaves them out."""
    if not keys:
        return
    from tunesearch.sweep import describe_keys

    of = f" of {','.join(settings.families)}" if settings.families else ""
    console.print(f"[yellow]warning:[/] {len(keys)} key(s) hold no trial{of} of this code, which the export "
                  f"leaves out: {describe_keys(keys)}. Run the same sweep again with more --time-budget: it "
                  "resumes, skipping the keys that hold their trials")


def _warn_unreached(keys, settings) -> None:
    """Name the keys a ``--more`` sweep's time budget ran out before. Run again, it would add its trials
    again at every key it reaches, so those keys want a sweep of their own. (A ``--trials`` sweep run
    again resumes where it stopped: its summary's "(budget)" says enough.)"""
    if not keys or not settings.more:
        return
    from tunesearch.sweep import describe_keys

    console.print(f"[yellow]warning:[/] the time budget ran out before {len(keys)} key(s): {describe_keys(keys)}. "
                  f"Run again, --more {settings.more} adds {settings.more} trials at every key it reaches, those "
                  "included: give those keys a sweep of their own (--shapes, --m)")


@app.command()
def show(
    gpu: Optional[str] = typer.Option(None, help="GPU name (default: every GPU in the store)"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    plot: Optional[str] = typer.Option("roofline.png", help="where to write the roofline plot ('' for none)"),
):
    """Print the stored best variant per key and write a roofline plot."""
    from tunesearch.db import Baseline
    from tunesearch.report import print_best, roofline_plot
    from tunesearch.sweep import is_current

    store = _open_store(db, create=False)
    best = store.best_trials(gpu)
    if not best:
        from tunesearch.export import for_gpu

        _fail(f"no successful trials in {store.url}" + for_gpu(store, gpu), 1)
    for name in sorted({t.gpu_name for t in best}):
        rows = [t for t in best if t.gpu_name == name]
        print_best(rows, f"best per key on {name}", current=is_current)
        g = store.find_gpu(name)
        if plot and g is not None:
            with store.session() as s:
                fp16 = {(b.m, b.n, b.k): b.us for b in s.query(Baseline).filter_by(gpu_name=name)}
            path = plot if len({t.gpu_name for t in best}) == 1 else f"{name.replace(' ', '_')}-{plot}"
            roofline_plot(rows, g.copy_bandwidth, fp16, path, f"{name}: tuned int4 vs fp16")
            console.print(f"plot: {path}")


@app.command()
def export(
    path: str = typer.Argument("dispatch.json", help="where to write the dispatch table"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    gpu: Optional[str] = typer.Option(None, help="only this GPU (default: every GPU in the store)"),
    merge: bool = typer.Option(False, help="merge into an existing table instead of replacing it"),
    current_code_only: bool = typer.Option(False, help="only trials timed with this tree's kernel code "
                                           "(default: any, with a warning naming the others)"),
):
    """Write the best variant per (GPU, shape, M bucket) as a dispatch table."""
    from tunesearch.dispatch import DispatchError
    from tunesearch.export import export as do_export
    from tunesearch.export import stale_buckets, uncompared_layouts, unweighed_buckets

    store = _open_store(db, create=False)
    try:
        table = do_export(store, path, gpu=gpu, merge=merge, current_code_only=current_code_only,
                          progress=lambda label: console.print(f"side-by-side plans: {label}", soft_wrap=True))
    except (ValueError, DispatchError) as exc:
        _fail(str(exc), 1)
    n = sum(len(s["buckets"]) for g in table["gpus"].values() for s in g["shapes"].values())
    console.print(f"wrote {path}: {len(table['gpus'])} GPU(s), {n} buckets", soft_wrap=True)
    stale = stale_buckets(table)
    if stale:  # a kernel changed since those trials: their variant may now run at another speed
        console.print(f"[yellow]warning:[/yellow] {len(stale)} of {n} buckets were timed with other kernel "
                      "code than this tree's (re-sweep those keys, or --current-code-only):")
        for line in stale[:20]:
            console.print(f"  {line}", markup=False)
        if len(stale) > 20:
            console.print(f"  ... and {len(stale) - 20} more")
    for line in uncompared_layouts(table):  # a sweep cut short can move a shape to a slower layout
        console.print(f"[yellow]warning:[/yellow] {line} (sweep the missing keys in that layout)")
    for line in unweighed_buckets(table):  # picked at the bucket's largest M alone, no split weighed inside
        console.print(f"[yellow]warning:[/yellow] {line}")


@app.command()
def dump(
    path: str = typer.Argument(..., help="file to write, one trial a JSON line (gzipped if it ends in .gz)"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    gpu: Optional[str] = typer.Option(None, help="only this GPU's trials (default: all)"),
):
    """Write the store's trials, each with its GPU, to a file that `tunesearch load` reads back."""
    from tunesearch.db.transfer import dump_trials

    store = _open_store(db, create=False)
    try:
        count = dump_trials(store, path, gpu)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc}")
    console.print(f"wrote {path}: {count} trials", soft_wrap=True)


@app.command()
def load(
    paths: list[str] = typer.Argument(..., help="files written by `tunesearch dump` (or sweep logs of trials)"),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
):
    """Merge trials from files into the store: a trial already there is kept; each file in one transaction."""
    from tunesearch.db import StoreError
    from tunesearch.db.transfer import load_trials

    store = _open_store(db)
    fallback = None
    try:
        import torch

        if torch.cuda.is_available():  # the GPU row of lines that name only their GPU
            from tunesearch.gpu import gpu_info

            fallback = gpu_info(torch.cuda.current_device()).to_dict()
    except Exception:  # a broken CUDA set-up only loses the fallback
        fallback = None
    try:
        added, present = load_trials(store, paths, fallback)
    except StoreError as exc:  # a file missing, unreadable or not of trials (named, with its line)
        _fail(str(exc))
    console.print(f"loaded {added} trials into {store.url} ({present} already there)", soft_wrap=True)


@app.command()
def bench(
    shapes: str = typer.Option("llama-7b", help="a preset, a model's config.json or KxN,KxN"),
    m: str = typer.Option("1,2,4,8,16,32,64,128,256,1024,4096", "--m", help="M values"),
    dispatch: Optional[str] = typer.Option(None, help="dispatch table (default: the packaged tables)"),
    group_size: int = typer.Option(128, help="quantization group size"),
    out: str = typer.Option("bench.json", help="where to write the JSON results"),
    plot: Optional[str] = typer.Option(None, help="where to write the plot (default: beside --out, its name "
                                       "ending .png; '' for none)"),
    peers: bool = typer.Option(True, help="also time tinygemm (and gemlite if installed)"),
    split: bool = typer.Option(True, help="M past a bucket as two or three launches where the table says so"),
):
    """Time the dispatch table's choice beside cuBLAS fp16, tinygemm and gemlite; print a table."""
    from tunesearch.benchmark import markdown_table, run_bench, write_results
    from tunesearch.dispatch import DispatchError, load_dispatch
    from tunesearch.gpu import NoGPUError, require_cuda
    from tunesearch.shapes import parse_ms, parse_shapes

    try:
        shape_list, ms = parse_shapes(shapes), parse_ms(m)  # a typo is reported before the missing GPU
        mm = load_dispatch(dispatch, group_size=group_size, split=split)
        require_cuda()
    except NoGPUError as exc:
        _fail(str(exc), 1)
    except (ValueError, DispatchError) as exc:
        _fail(str(exc))
    # the JSON is rewritten after every row (complete: false until the end): a run cut short keeps
    # what it measured, and prints the table of it (`timeout` sends SIGTERM: taken as an interrupt)
    measured = {"rows": []}

    def checkpoint(partial):
        measured.update(partial)
        write_results(partial, out)

    try:
        with _sigterm_interrupts():
            result = run_bench(mm, shape_list, ms, group_size, peers, checkpoint=checkpoint, log=_bench_line)
    except KeyboardInterrupt:
        console.print(f"interrupted after {len(measured['rows'])} rows; they are in {out} (complete: false)",
                      highlight=False, soft_wrap=True)
        if measured["rows"]:
            print(markdown_table(measured))
        raise typer.Exit(130)
    # beside the JSON unless named: a run's two files stay together (the plot used to land in the
    # working directory, wherever --out pointed)
    plot_path = str(Path(out).with_suffix(".png")) if plot is None else plot or None
    write_results(result, out, plot_path)
    print(markdown_table(result))
    o = result["python_overhead_us"]
    print(f"\nhost time per call (M=1): dispatch {o['dispatch']:.1f} us, Triton's own launch of the same "
          f"kernel {o['triton_launch']:.1f} us (difference {o['overhead']:+.1f} us)")
    print(f"wrote {out}" + (f" and {plot_path}" if plot_path else ""))


def _bench_line(row):
    console.print(f"{row['K']}x{row['N']} M={row['M']}: {row['tunesearch_us']:.1f} us")


@app.command("bench-table")
def bench_table(results: list[str] = typer.Argument(..., help="bench JSON files (`tunesearch bench --out`)")):
    """Print the markdown table of bench results, one file's rows after another's: a run cut short, or
    several runs side by side. Each row keeps its own run's fp16 and peers."""
    import json

    from tunesearch.benchmark import markdown_table

    rows = []
    for path in results:
        try:
            data = json.loads(Path(path).read_text())
            rows += data["rows"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            _fail(f"{path}: not a bench result ({type(exc).__name__}: {exc})")
        if not data.get("complete", True):
            console.print(f"{path}: an interrupted run ({len(data['rows'])} rows)", highlight=False, soft_wrap=True)
    print(markdown_table({"rows": rows}))


@app.command("check-model")
def check_model(
    hidden: int = typer.Option(128, help="hidden size of the random Llama"),
    intermediate: int = typer.Option(256, help="MLP size"),
    layers: int = typer.Option(2, help="decoder blocks"),
    heads: int = typer.Option(4, help="attention heads"),
    kv_heads: Optional[int] = typer.Option(None, help="key/value heads (default: heads/2; Llama-7B has 32 of 32)"),
    vocab: int = typer.Option(256, help="vocabulary"),
    tokens: int = typer.Option(16, help="prompt length"),
    group_size: int = typer.Option(128, help="quantization group size"),
    dispatch: Optional[str] = typer.Option(None, help="dispatch table (default: the packaged tables)"),
    device: str = typer.Option("cuda", help="cuda or cpu (cpu: dequantize-then-matmul or the interpreter)"),
):
    """Logit check: a random Llama quantized to W4A16 against the same model with dequantized weights."""
    import json

    import torch

    from tunesearch.dispatch import DispatchError, load_dispatch
    from tunesearch.model_check import logit_check, tiny_llama

    if device == "cuda" and not torch.cuda.is_available():
        _fail("no CUDA GPU is visible; pass --device cpu", 1)
    try:
        mm = load_dispatch(dispatch, group_size=group_size)
    except (ValueError, DispatchError) as exc:
        _fail(str(exc))
    kv = kv_heads if kv_heads is not None else max(1, heads // 2)
    if kv < 1 or heads % kv:
        _fail(f"--kv-heads {kv} must be >= 1 and divide --heads {heads}")
    model = tiny_llama(hidden, intermediate, layers, heads, kv, vocab, device=device)
    ids = torch.randint(0, vocab, (1, tokens), generator=torch.Generator().manual_seed(0)).to(device)
    result = logit_check(model, ids, dispatch=mm, group_size=group_size)
    print(json.dumps(result.to_dict()))
    if not result.passed:
        raise typer.Exit(1)


@app.command("decode-bench")
def decode_bench(
    layers: int = typer.Option(8, help="decoder blocks of the 7B-shaped model"),
    hidden: int = typer.Option(4096, help="hidden size"),
    intermediate: int = typer.Option(11008, help="MLP size"),
    heads: int = typer.Option(32, help="attention heads"),
    kv_heads: Optional[int] = typer.Option(None, help="k/v heads, grouped-query attention (default: --heads)"),
    vocab: int = typer.Option(32000, help="vocabulary"),
    config: Optional[str] = typer.Option(None, help="a Llama-like model's config.json (or its folder): its sizes, "
                                         "heads, k/v heads, head size and vocabulary instead of the flags above "
                                         "(--layers still sets the blocks)"),
    batch: str = typer.Option("1,4,16", help="batch sizes"),
    tokens: int = typer.Option(64, help="tokens generated per run"),
    prompt: int = typer.Option(16, help="prompt length (prefill, not timed)"),
    group_size: int = typer.Option(128, help="quantization group size"),
    dispatch: Optional[str] = typer.Option(None, help="dispatch table (default: the packaged tables)"),
    out: str = typer.Option("decode.json", help="where to write the JSON results"),
    eager: bool = typer.Option(False, "--eager", help="launch each step's kernels from Python, no CUDA graph "
                               "(what a caller without graphs sees: host time counts)"),
):
    """Greedy decode, one CUDA graph per step (or eager): fp16 against W4A16, tokens/s per batch size."""
    import json

    import torch
    import triton

    from tunesearch.decode import DecoderConfig, decode_benchmark, markdown_table, random_decoder
    from tunesearch.dispatch import DispatchError, load_dispatch
    from tunesearch.gpu import NoGPUError, gpu_info, require_cuda
    from tunesearch.shapes import parse_counts

    try:
        batches = parse_counts(batch, "--batch")  # a typo is reported before the missing GPU
        if config:
            from tunesearch.shapes import ModelSizes

            cfg = DecoderConfig.of_model(ModelSizes.read(config), layers, prompt + tokens + 1, vocab)
        else:
            cfg = DecoderConfig(hidden, intermediate, heads, layers, vocab, max_len=prompt + tokens + 1,
                                kv_heads=kv_heads)
        mm = load_dispatch(dispatch, group_size=group_size)
        require_cuda()
    except NoGPUError as exc:
        _fail(str(exc), 1)
    except (ValueError, DispatchError) as exc:
        _fail(str(exc))
    model = random_decoder(cfg, device="cuda")
    rows = decode_benchmark(model, mm, batches, tokens, prompt, graph=not eager, group_size=group_size,
                            log=lambda r: console.print(f"batch {r.batch}: {r.speedup:.2f}x"))
    import datetime
    from dataclasses import asdict

    info = gpu_info(torch.cuda.current_device())
    record = dict(gpu=asdict(info), torch=torch.__version__, triton=triton.__version__,
                  created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  config=asdict(cfg) | {"prompt": prompt, "tokens": tokens}, graph=not eager,
                  rows=[r.to_dict() for r in rows])
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(markdown_table(rows))


@app.command()
def version():
    """Print the versions tunesearch runs with."""
    import torch
    import triton

    import tunesearch

    print(f"tunesearch {tunesearch.__version__}, torch {torch.__version__}, triton {triton.__version__}")


def main():
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    app()


if __name__ == "__main__":
    main()
