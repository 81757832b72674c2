"""The decode benchmark's model and loop, on the CPU: the static-cache step must reproduce a full
forward pass, and greedy decoding must pick what the full forward pass would pick."""
import pytest
import torch

from tunesearch.decode import (Decoder, DecoderConfig, GreedyDecoder, decode_benchmark, markdown_table,
                               random_decoder)

CFG = DecoderConfig(hidden=128, intermediate=256, heads=4, layers=2, vocab=64, max_len=32)
# grouped k/v (2 heads serving 4) and heads of 48 that do not span the hidden size (4 x 48 = 192)
GROUPED = DecoderConfig(hidden=128, intermediate=256, heads=4, layers=2, vocab=64, max_len=32, kv_heads=2,
                        head_size=48)


@pytest.mark.parametrize("cfg", [CFG, GROUPED], ids=["mha", "grouped"])
def test_cached_steps_match_a_full_forward_pass(cfg):
    model = random_decoder(cfg, device="cpu", seed=1)
    tokens = torch.randint(0, cfg.vocab, (2, 10), generator=torch.Generator().manual_seed(0))
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


def test_grouped_heads_compute_what_their_k_v_copied_to_every_head_computes():
    # the same model written as plain multi-head attention: each q head's k/v rows, copied from its group's
    grouped = random_decoder(GROUPED, device="cpu", seed=4)
    plain = Decoder(DecoderConfig(**{**GROUPED.__dict__, "kv_heads": None})).to(torch.float16).eval()
    shared = {name: t for name, t in grouped.state_dict().items() if "qkv_proj" not in name}
    assert not plain.load_state_dict(shared, strict=False).unexpected_keys  # all but the qkv projections
    H, KV, D = GROUPED.heads, GROUPED.kv, GROUPED.head_dim
    for src, dst in zip(grouped.blocks, plain.blocks):
        w = src.qkv_proj.weight.view(H + 2 * KV, D, -1)
        q, k, v = w.split((H, KV, KV))
        per_head = torch.arange(H) // (H // KV)  # q head i reads k/v head i // (H / KV)
        dst.qkv_proj.weight.data.copy_(torch.cat([q, k[per_head], v[per_head]]).reshape(-1, w.shape[-1]))
    tokens = torch.randint(0, GROUPED.vocab, (2, 7), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        for m in (grouped, plain):
            m.reset_cache(2)
        want, got = plain(tokens, torch.arange(7)).float(), grouped(tokens, torch.arange(7)).float()
    assert (got - want).abs().max().item() < 1e-2 * want.abs().max().item()


@pytest.mark.parametrize("fields, message", [(dict(heads=4, kv_heads=3), "evenly"), (dict(head_size=7), "even"),
                                              (dict(layers=0), "positive")])
def test_bad_decoder_sizes_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        DecoderConfig(**{**CFG.__dict__, **fields})


def test_a_decoder_of_a_models_config_runs_the_shapes_the_sweep_tunes_for_it(tmp_path):
    import json

    from tunesearch.nn import layer_shapes, quantize_model
    from tunesearch.shapes import ModelSizes

    (tmp_path / "config.json").write_text(json.dumps(dict(
        hidden_size=128, intermediate_size=384, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        vocab_size=96)))
    sizes = ModelSizes.read(tmp_path)
    cfg = DecoderConfig.of_model(sizes, layers=1, max_len=16)
    assert (cfg.kv, cfg.head_dim, cfg.vocab) == (2, 64, 96)
    model = quantize_model(random_decoder(cfg, device="cpu"), verify=False)
    # fused qkv (128 -> 256 + 2 x 128), o (256 -> 128), fused gate+up, down: each among the sweep's shapes
    assert layer_shapes(model) == [(128, 512), (256, 128), (128, 768), (384, 128)]
    assert set(layer_shapes(model)) <= set(sizes.shapes())


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [CFG, GROUPED], ids=["mha", "grouped"])
def test_a_captured_step_decodes_what_eager_steps_decode_on_the_gpu(cfg):
    model = random_decoder(cfg, device="cuda", seed=6)
    prompt = torch.randint(0, cfg.vocab, (2, 5), generator=torch.Generator().manual_seed(2)).cuda()
    eager = GreedyDecoder(model, prompt, new_tokens=6, graph=False).decode()
    assert torch.equal(GreedyDecoder(model, prompt, new_tokens=6, graph=True).decode(), eager)
