"""Which reference gives a split call's bits? (NOTES.md row 131: two GPU dispatch tests on the H100 table)

    python benchmarks/experiments/plan_bits.py

For 4096x12288 M=257 and 4096x22016 M=1025 under CONCURRENT True, eager and captured: the dispatch's output
against (a) each launch of its plan run alone as the variant's matmul on its rows of A, (b) the dispatch
called on each launch's rows, (c) CONCURRENT False. Prints the rows that differ and the largest difference."""
import torch

from tunesearch import dispatch, load_dispatch
from tunesearch.variants import matmul, quantize_pack


def diff(x, y):
    bad = (x != y).any(dim=1).nonzero().flatten().tolist()
    if not bad:
        return "equal"
    return f"{len(bad)} rows differ ({bad[:4]}...), max {(x.float() - y.float()).abs().max():.3g}"


def parts(plan, a, run):
    out, s = [], 0
    for rows, variant in plan:
        out.append(run(a[s:s + rows], variant))
        s += rows
    return torch.cat(out)


def main():
    mm = load_dispatch()
    cuda = torch.device("cuda")
    for K, N, M in ((4096, 12288, 257), (4096, 22016, 1025)):
        packed, scales = quantize_pack(torch.randn(K, N, device="cuda"), 128)
        packed = mm.prepare(packed, scales)
        a = torch.randn(M, K, device="cuda").half()
        dispatch.CONCURRENT = False
        serial_plan, serial = mm.plan(M, N, K, cuda, eager=True), mm(a, packed, scales)
        dispatch.CONCURRENT = True
        for eager in (True, False):
            plan = mm.plan(M, N, K, cuda, eager=eager)
            if eager:
                out = mm(a, packed, scales)
            else:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = mm(a, packed, scales)
                graph.replay()
                torch.cuda.synchronize()
            dispatch.CONCURRENT = False
            by_variant = parts(plan, a, lambda x, v: matmul(x, packed, scales, v, 128))
            by_mm = parts(plan, a, lambda x, v: mm(x, packed, scales))
            dispatch.CONCURRENT = True
            print(f"{K}x{N} M={M} {'eager' if eager else 'captured'} plan {[(r, v.id) for r, v in plan]} "
                  f"(serial {[r for r, _ in serial_plan]}): by variant {diff(out, by_variant)}; "
                  f"by mm {diff(out, by_mm)}; "
                  f"serial {diff(out, serial)}; mm parts vs variant parts {diff(by_mm, by_variant)}", flush=True)


if __name__ == "__main__":
    main()
