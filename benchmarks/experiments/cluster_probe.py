"""EXPERIMENT (offline): can Gluon reduce a split-K partial across the CTAs of a cluster (NOTES.md row 66)?

    python benchmarks/experiments/cluster_probe.py        (no GPU: compiles for sm_90 and says what it got)

Row 66: rsmma's split-K reduction costs 1.3-2.6 us at M <= 64 because every CTA's partial goes through
L2 (store, fence, counter, reads). The splits of a tile launched as one cluster could reduce through
distributed shared memory instead. Two ways in Gluon (Triton 3.6), both tried on a [2 splits, 64, 16]
fp32 tile whose split dimension lies across the cluster's 2 CTAs (`cga_layout`, `num_ctas=2`):
- `sum`: gl.sum over that dimension;
- `convert`: gl.convert_layout to every CTA holding the whole tile, then a sum within each CTA.
On Triton 3.6 neither compiles: the reduction asserts `isReduceWithinCTA`, and the conversion's
`nvvm.mapa` fails MLIR's verifier (a shared-memory pointer where it wants a generic one). Rerun it on a
newer Triton before planning on either; otherwise the reduction needs PTX of its own.
"""
import json

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def cluster_sum_kernel(x_ptr, y_ptr, SPLIT: gl.constexpr, WHOLE: gl.constexpr, CONVERT: gl.constexpr):
    """y [64, 16] = the sum over 2 of x [2, 64, 16], the 2 in layout SPLIT lying across the cluster's CTAs."""
    s = gl.arange(0, 2, layout=gl.SliceLayout(1, gl.SliceLayout(2, SPLIT)))
    r = gl.arange(0, 64, layout=gl.SliceLayout(0, gl.SliceLayout(2, SPLIT)))
    c = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, SPLIT)))
    offsets = (gl.expand_dims(gl.expand_dims(s, 1), 2) * 1024 + gl.expand_dims(gl.expand_dims(r, 0), 2) * 16
               + gl.expand_dims(gl.expand_dims(c, 0), 1))
    x = gl.load(x_ptr + offsets)
    if CONVERT:
        x = gl.convert_layout(x, WHOLE)
    y = gl.sum(x, axis=0)
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, y.type.layout))
    cols = gl.arange(0, 16, layout=gl.SliceLayout(0, y.type.layout))
    gl.store(y_ptr + gl.expand_dims(rows, 1) * 16 + gl.expand_dims(cols, 0), y)


def compile_form(convert: bool) -> dict:
    """The kernel compiled for sm_90 with 2 CTAs a cluster: whether it compiles, and its PTX's cluster ops."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    def blocked(cga):
        return gl.BlockedLayout([1, 1, 4], [1, 8, 4], [1, 4, 1], [2, 1, 0], cga_layout=cga)

    constexprs = dict(SPLIT=blocked([[1, 0, 0]]), WHOLE=blocked([[0, 0, 0]]), CONVERT=convert)
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", **{name: "constexpr" for name in constexprs}}
    src = GluonASTSource(cluster_sum_kernel, signature, constexprs=constexprs)
    try:
        ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=4, num_ctas=2)).asm["ptx"]
    except Exception as e:  # what Triton says, shortened
        return dict(compiles=False, error=f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}")
    return dict(compiles=True, **{op: ptx.count(op) for op in ("mapa", "shared::cluster", "barrier.cluster")})


if __name__ == "__main__":
    print(json.dumps({"sum": compile_form(False), "convert": compile_form(True)}))
