"""Tables and plots of stored results."""
from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table


def best_table(trials, title: str, current=None) -> Table:
    """The stored best per key; with ``current`` (a trial -> bool), a trial of an older kernel code is
    marked so, since the export (``--current-code-only``) does not take it."""
    table = Table(title=title)
    for col in ("shape KxN", "M", "layout", "variant", "µs", "% roofline", "vs fp16"):
        table.add_column(col, justify="right" if col not in ("variant", "shape KxN", "layout") else "left",
                         no_wrap=True)
    for t in trials:
        older = current is not None and not current(t)
        table.add_row(f"{t.k}x{t.n}", str(t.m), t.layout, t.variant_id + (" (older code)" if older else ""),
                      f"{t.us:.2f}",
                      f"{100 * (t.roofline_frac or 0):.0f}%",
                      f"{t.speedup_fp16:.2f}x" if t.speedup_fp16 else "-")
    return table


def print_best(trials, title: str, console: Console | None = None, current=None):
    # written to a file or a pipe, rich would fit the table to 80 columns and cut the variant ids short
    console = console or Console(width=None if sys.stdout.isatty() else 160)
    console.print(best_table(trials, title, current))


def roofline_plot(trials, copy_bandwidth: float, fp16: dict, path: str, title: str) -> str:
    """Time vs M per shape: the tuned best, cuBLAS fp16 and the int4 bandwidth roofline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .bench import kernel_bytes

    shapes = sorted({(t.k, t.n) for t in trials})
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.8), squeeze=False)
    for ax, (k, n) in zip(axes[0], shapes):
        fastest = {}  # per M, the fastest of the layouts timed there
        for t in trials:
            if (t.k, t.n) == (k, n) and (t.m not in fastest or t.us < fastest[t.m].us):
                fastest[t.m] = t
        rows = [fastest[m] for m in sorted(fastest)]
        ms = [t.m for t in rows]
        ax.plot(ms, [t.us for t in rows], "o-", label="tunesearch int4")
        f16 = [(t.m, fp16.get((t.m, t.n, t.k))) for t in rows if fp16.get((t.m, t.n, t.k))]
        if f16:
            ax.plot([m for m, _ in f16], [u for _, u in f16], "s--", label="cuBLAS fp16")
        ax.plot(ms, [kernel_bytes(m, n, k, t.group_size) / copy_bandwidth * 1e6 for m, t in zip(ms, rows)],
                "k:", label="int4 bandwidth roofline")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("M")
        ax.set_ylabel("µs")
        ax.set_title(f"K={k} N={n}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
