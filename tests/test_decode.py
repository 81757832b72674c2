"""The decode benchmark's model and loop, on the CPU: the static-cache step must reproduce a full
forward pass, and greedy decoding must pick what the full forward pass would pick."""
import torch

from tunesearch.decode import DecoderConfig, GreedyDecoder, decode_benchmark, markdown_table, random_decoder

CFG = DecoderConfig(hidden=128, intermediate=256, heads=4, layers=2, vocab=64, max_len=32)


def test_cached_steps_match_a_full_forward_pass():
    model = random_decoder(CFG, device="cpu", seed=1)
    tokens = torch.randint(0, CFG.vocab, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        model.reset_cache(2)
        full = model(tokens, torch.arange(10)).float()
        model.reset_cache(2)
        first = model(tokens[:, :6], torch.arange(6)).float()
        steps = [model(tokens[:, t:t + 1], torch.tensor([t])).float() for t in range(6, 10)]
    got = torch.cat([first] + steps, dim=1)
    assert (got - full).abs().max().item() < 2e-2 * full.abs().max().item()


def test_greedy_decode_continues_with_the_argmax_of_the_full_sequence():
    model = random_decoder(CFG, device="cpu", seed=2)
    prompt = torch.randint(0, CFG.vocab, (3, 5), generator=torch.Generator().manual_seed(1))
    out = GreedyDecoder(model, prompt, new_tokens=4, graph=False).decode()
    seq = torch.cat([prompt, out], dim=1)
    with torch.no_grad():
        model.reset_cache(3)
        logits = model(seq[:, :-1], torch.arange(seq.shape[1] - 1)).float()
    # each generated token is the argmax after the tokens before it (ties are vanishingly rare)
    assert torch.equal(logits[:, 4:].argmax(-1), out)


def test_decode_benchmark_rows():
    model = random_decoder(CFG, device="cpu", seed=3)
    rows = decode_benchmark(model, None, batches=(1, 2), new_tokens=3, prompt_len=4, graph=False, repeats=1)
    assert [r.batch for r in rows] == [1, 2]
    for r in rows:
        assert r.fp16_tokens_per_s > 0 and r.int4_tokens_per_s > 0 and r.speedup > 0
    assert "| 2 |" in markdown_table(rows)
