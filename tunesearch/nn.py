"""W4A16 layers for real models: ``W4A16Linear`` and ``quantize_model``.

    model = quantize_model(model, dispatch=load_dispatch())   # every nn.Linear but lm_head, repacked once
    y = model(input_ids)                                      # calls the dispatch table's kernels
"""
from __future__ import annotations

import copy
import fnmatch
import logging

import torch
from torch import nn

from tunesearch.variants import dequantize, pack_linear, reference_matmul
from tunesearch.variants.layout import check_packed

log = logging.getLogger("tunesearch")


class W4A16Linear(nn.Module):
    """``y = x @ W + b`` with W int4 (``packed`` int32 [K/8, N], ``scales`` fp16 [K/G, N]).

    ``mm`` is a dispatcher from ``load_dispatch`` (None: dequantize-then-matmul). The packed
    weights and scales are buffers, so ``state_dict`` saves and loads them; ``from_linear`` stores the
    weights in the layout ``mm``'s table keeps this shape in (``packed`` is then [K/32, 4N], frag32).
    A state dict loads whichever layout it was saved in, and is stored in ``mm``'s (a checkpoint quantized
    once loads into a fresh layer, on any GPU's table).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group_size: int = 128,
                 mm=None, device=None):
        super().__init__()
        if in_features % group_size or in_features % 8:
            raise ValueError(f"in_features={in_features} must be a multiple of 8 and of group_size={group_size}")
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.register_buffer("packed", torch.zeros(in_features // 8, out_features, dtype=torch.int32, device=device))
        self.register_buffer("scales", torch.zeros(in_features // group_size, out_features,
                                                   dtype=torch.float16, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=torch.float16, device=device) if bias else None)
        self.mm = mm

    @classmethod
    def from_linear(cls, linear: nn.Linear, group_size: int = 128, mm=None) -> "W4A16Linear":
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, group_size, mm,
                    device=linear.weight.device)
        packed, scales = pack_linear(linear, group_size)
        layer.scales.copy_(scales)
        layer.packed = mm.prepare(packed, scales) if layer._dispatched() else packed
        if linear.bias is not None:
            layer.bias.copy_(linear.bias.detach().to(torch.float16))
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"input has {x.shape[-1]} features, this layer takes {self.in_features}")
        if x.dtype is not torch.float16:  # W4A16: the kernels take fp16 activations only
            raise ValueError(f"W4A16Linear takes float16 input, got {x.dtype}: run the model in float16 "
                             "(model.half()), as quantize_model's docs say")
        x2 = x.reshape(-1, self.in_features)
        if self._dispatched():
            y = self.mm(x2, self.packed, self.scales)
        else:
            y = reference_matmul(x2, self.packed, self.scales, self.group_size)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # the buffer takes the shape of the saved pair's layout where that pair is this layer's weights in
        # some layout (layout.check_packed, the spec, says so), then mm's layout
        saved, saved_scales = state_dict.get(prefix + "packed"), state_dict.get(prefix + "scales")
        if isinstance(saved, torch.Tensor) and isinstance(saved_scales, torch.Tensor) \
                and saved.shape != self.packed.shape and self._holds(saved, saved_scales):
            self.packed = torch.empty(saved.shape, dtype=self.packed.dtype, device=self.packed.device)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if self._dispatched():
            self.packed = self.mm.prepare(self.packed, self.scales)

    def _dispatched(self) -> bool:
        """Whether ``mm`` runs this layer: a dispatcher whose table is of this layer's group size (any other
        layer runs the reference, dequantize-then-matmul)."""
        return self.mm is not None and self.mm.group_size == self.group_size

    def _holds(self, packed: torch.Tensor, scales: torch.Tensor) -> bool:
        """Whether (packed, scales) are this layer's [K, N] weights, in any layout."""
        try:
            return check_packed(packed, scales, self.group_size) == (self.in_features, self.out_features)
        except ValueError:
            return False

    def dequantized_weight(self) -> torch.Tensor:
        """fp16 [N, K], as ``nn.Linear.weight`` would hold it."""
        return dequantize(self.packed, self.scales, self.group_size).t()

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, group_size={self.group_size}, "
                f"dispatch={'table' if self.mm is not None else 'dequantize-then-matmul'}")


def _replaceable(model: nn.Module, skip, group_size: int):
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        if any(fnmatch.fnmatch(name, pattern) for pattern in skip):
            continue
        if module.in_features % group_size:
            log.info("tunesearch: %s kept in fp16: in_features=%d is not a multiple of %d",
                     name, module.in_features, group_size)
            continue
        yield name, module


def _set(model: nn.Module, name: str, module: nn.Module):
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, module)


def quantize_model(model: nn.Module, dispatch=None, skip=("lm_head", "*.lm_head"), group_size: int = 128,
                   verify: bool = True) -> nn.Module:
    """Replace the model's ``nn.Linear`` layers (but ``skip`` patterns) by ``W4A16Linear`` in place,
    repacking each once. The model must then run in float16 (``model.half()``): the layers take fp16
    activations. ``dispatch``: a dispatcher from ``load_dispatch``, whose kernels the layers call
    (None: dequantize-then-matmul, the reference, slow on a GPU: a warning says so there). With ``verify``,
    the first replaced layer is checked against dequantize-then-matmul on random input, so a packing or
    kernel mismatch stops here."""
    replaced = []
    for name, linear in list(_replaceable(model, skip, group_size)):
        layer = W4A16Linear.from_linear(linear, group_size, dispatch)
        _set(model, name, layer)
        replaced.append((name, layer))
    if not replaced:
        raise ValueError(f"no nn.Linear layer to quantize (skip={skip}, group_size={group_size})")
    if dispatch is None and replaced[0][1].packed.is_cuda:
        log.warning("tunesearch: quantize_model without a dispatch table: the layers run dequantize-then-matmul "
                    "on every call; pass dispatch=load_dispatch() for the tuned kernels")
    if verify:
        _verify(*replaced[0])
    log.info("tunesearch: %d linear layers quantized to W4A16 (group %d)", len(replaced), group_size)
    return model


def _verify(name: str, layer: W4A16Linear):
    """Stop at a packing or kernel mismatch: ``layer`` against dequantize-then-matmul on random input."""
    x = torch.randn(3, layer.in_features, device=layer.packed.device).to(torch.float16)
    got = layer(x).float()
    want = x.float() @ dequantize(layer.packed, layer.scales, layer.group_size).float()
    if layer.bias is not None:
        want = want + layer.bias.float()
    err = ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()
    if not err < 2e-3:
        raise RuntimeError(f"{name}: W4A16 output differs from dequantize-then-matmul (rel. err {err:.3g})")


GPTQ_KEYS = ("qweight", "qzeros", "scales", "g_idx", "bias")


def load_gptq(model: nn.Module, state_dict: dict, dispatch=None, checkpoint_format: str = "gptq",
              verify: bool = True) -> nn.Module:
    """Load a 4-bit GPTQ checkpoint's ``state_dict`` into ``model`` (its architecture in float16, e.g. built
    from the checkpoint's config), in place: each ``nn.Linear`` the checkpoint holds as ``qweight``,
    ``qzeros``, ``scales`` (and ``g_idx``, ``bias``) becomes a ``W4A16Linear`` calling ``dispatch``'s
    kernels on those weights as stored (``variants.gptq.from_gptq``: symmetric checkpoints, in group
    order), every other tensor loads as it is. A key the model lacks, or a tensor of its left unloaded,
    is an error naming it."""
    from tunesearch.variants.gptq import from_gptq

    rest, replaced = dict(state_dict), []
    names = [name for name, _ in model.named_modules() if f"{name}.qweight" in state_dict]
    for name in names:  # by name, so that each fp16 layer is freed once swapped
        prefix, module = f"{name}.", model.get_submodule(name)
        if not isinstance(module, nn.Linear):
            raise ValueError(f"{name}: the checkpoint holds GPTQ weights for it, the model a {type(module).__name__}")
        tensors = {key: rest.pop(prefix + key, None) for key in GPTQ_KEYS}
        try:
            packed, scales = from_gptq(tensors["qweight"], tensors["qzeros"], tensors["scales"], tensors["g_idx"],
                                       checkpoint_format=checkpoint_format)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
        K, N = packed.shape[0] * 8, packed.shape[1]
        if (K, N) != (module.in_features, module.out_features):
            raise ValueError(f"{name}: the checkpoint's weights are {K}x{N} (in x out), the model's layer "
                             f"{module.in_features}x{module.out_features}")
        if (tensors["bias"] is None) != (module.bias is None):
            raise ValueError(f"{name}: the checkpoint {'lacks' if tensors['bias'] is None else 'has'} a bias "
                             "the model's layer " + ("has" if tensors["bias"] is None else "lacks"))
        device = module.weight.device
        layer = W4A16Linear(K, N, module.bias is not None, K // scales.shape[0], dispatch, device=device)
        layer.load_state_dict({"packed": packed.to(device), "scales": scales.to(device)}
                              | ({"bias": tensors["bias"].to(device, torch.float16)} if module.bias is not None
                                 else {}))
        _set(model, name, layer)
        replaced.append((name, layer))
    if not replaced:
        raise ValueError("the state dict holds no GPTQ layer (no '<name>.qweight' for a module of the model)")
    other = [] if dispatch is None else sorted({layer.group_size for _, layer in replaced} - {dispatch.group_size})
    if other:  # such layers would run dequantize-then-matmul, the reference
        log.warning("tunesearch: the checkpoint's group size is %s, the dispatcher's %d: those layers run "
                    "dequantize-then-matmul (load_dispatch(group_size=...) for their kernels)",
                    ", ".join(map(str, other)), dispatch.group_size)
    result = model.load_state_dict(rest, strict=False)
    quantized = {name for name, _ in replaced}  # their buffers were filled above
    held = model.state_dict(keep_vars=True)
    loaded = {id(held[key]) for key in rest if key in held}  # a tied tensor (lm_head's) loads with its twin
    missing = [key for key in result.missing_keys
               if key.rpartition(".")[0] not in quantized and id(held[key]) not in loaded]
    if result.unexpected_keys or missing:
        raise ValueError("the checkpoint does not fit the model: "
                         + "; ".join(f"{what} {', '.join(keys[:5])}" + (" ..." if len(keys) > 5 else "")
                                     for what, keys in (("keys the model lacks:", result.unexpected_keys),
                                                        ("tensors it leaves unloaded:", missing)) if keys))
    if verify:
        _verify(*replaced[0])
    log.info("tunesearch: %d GPTQ layers loaded as W4A16", len(replaced))
    return model


def layer_shapes(model: nn.Module) -> list[tuple[int, int]]:
    """The (K, N) of the model's ``W4A16Linear`` layers, each once: what ``mm.warmup(layer_shapes(model),
    max_m)`` compiles the table's kernels for before serving (else each compiles at its first call)."""
    return list(dict.fromkeys((m.in_features, m.out_features) for m in model.modules()
                              if isinstance(m, W4A16Linear)))


def dequantized_reference(model: nn.Module, skip=("lm_head", "*.lm_head"), group_size: int = 128) -> nn.Module:
    """A copy of the float ``model`` whose replaceable linears hold dequantize(quantize_pack(W)):
    what a correct W4A16 model must compute, built from the specification alone."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for _, linear in list(_replaceable(ref, skip, group_size)):
            packed, scales = pack_linear(linear, group_size)
            linear.weight.copy_(dequantize(packed, scales, group_size).t().to(linear.weight.dtype))
    return ref
