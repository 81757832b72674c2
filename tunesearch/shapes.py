"""Shape presets (K, N) per model, shapes read from a model's config.json, M buckets, and the parsing of
--shapes / --m."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_M_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144, 160, 192, 256, 320, 384, 448, 512, 640, 768,
                     896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 4096)
# 144 and 160 since the twotile family (NOTES.md row 92): its 128 + 16 and 128 + 32 token tiles serve
# M=129..144 and 145..160 at 29.3-30.7 us on 4096x12288, where bucket 192's 128 + 64 takes 33.9 at any M.
# 320..3072 since NOTES.md row 95: a bucket's token tiles leave up to a whole tile row idle at M just past
# the bucket below (4096x12288 M=1300 ran bucket 2048's pick at 221 us, 0.79x fp16; bucket 1280's, 192 us)


def _llama(hidden: int, inter: int, kv: int, q: int | None = None) -> list[tuple[int, int]]:
    """q, o (if its K differs: heads x head_dim not the hidden size), k/v (if grouped), gate/up, down, fused
    qkv, fused gate+up; as (K, N), each once."""
    q = hidden if q is None else q
    shapes = [(hidden, q), (q, hidden)]
    if kv != q:
        shapes.append((hidden, kv))
    shapes += [(hidden, inter), (inter, hidden), (hidden, q + 2 * kv), (hidden, 2 * inter)]
    return list(dict.fromkeys(shapes))


PRESETS: dict[str, list[tuple[int, int]]] = {
    "llama-7b": _llama(4096, 11008, 4096),
    "llama-13b": _llama(5120, 13824, 5120),
    "llama3-8b": _llama(4096, 14336, 1024),
    "mistral-7b": _llama(4096, 14336, 1024),
    "llama-70b": _llama(8192, 28672, 1024),
}


@dataclass(frozen=True)
class ModelSizes:
    """A Llama-like model's sizes, as its Hugging Face ``config.json`` gives them."""
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int | None
    source: str

    @classmethod
    def read(cls, path: str | Path) -> "ModelSizes":
        """From ``config.json`` (or the folder holding it): ``hidden_size``, ``intermediate_size``,
        ``num_attention_heads``, and where they differ from the defaults ``num_key_value_heads`` (grouped
        k/v) and ``head_dim`` (heads x head_dim other than the hidden size); a multimodal config's
        ``text_config``."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        try:
            config = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"bad model config {str(path)!r}: {exc}") from None
        if isinstance(config, dict) and "hidden_size" not in config and isinstance(config.get("text_config"), dict):
            config = config["text_config"]
        need = ("hidden_size", "intermediate_size", "num_attention_heads")
        missing = [key for key in need if not isinstance(config, dict) or not isinstance(config.get(key), int)]
        if missing:
            raise ValueError(f"bad model config {str(path)!r}: no integer {', '.join(missing)} (a Llama-like "
                             "model's config.json has them; give KxN pairs otherwise)")
        hidden, heads = config["hidden_size"], config["num_attention_heads"]
        sizes = cls(hidden, config["intermediate_size"], heads, config.get("num_key_value_heads") or heads,
                    config.get("head_dim") or hidden // max(heads, 1), config.get("vocab_size"), str(path))
        if not all(isinstance(x, int) and x > 0 for x in (hidden, heads, sizes.kv_heads, sizes.head_dim)):
            raise ValueError(f"bad model config {str(path)!r}: sizes must be positive integers")
        return sizes

    def shapes(self) -> list[tuple[int, int]]:
        """The linear layers' (K, N), as the presets give them, fused ones too."""
        return _checked(_llama(self.hidden, self.intermediate, self.kv_heads * self.head_dim,
                               self.heads * self.head_dim), f"from {self.source}")


def config_shapes(path: str | Path) -> list[tuple[int, int]]:
    """The linear layers' (K, N) of a Llama-like model from its Hugging Face ``config.json`` (``ModelSizes``)."""
    return ModelSizes.read(path).shapes()


def _checked(shapes: list[tuple[int, int]], where: str) -> list[tuple[int, int]]:
    for k, n in shapes:
        if k <= 0 or n <= 0 or k % 8:
            raise ValueError(f"bad shape {k}x{n} {where}: K and N must be positive and K a multiple of 8")
    return shapes


def parse_shapes(spec: str) -> list[tuple[int, int]]:
    """``llama-7b``, a model's ``config.json`` (or its folder: ``config_shapes``) or ``4096x11008,11008x4096``
    (K x N) -> [(K, N), ...]."""
    spec = (spec or "").strip()
    if spec in PRESETS:
        return list(PRESETS[spec])
    if spec and (spec.endswith(".json") or Path(spec).is_dir()):
        return config_shapes(spec)
    shapes = []
    for item in spec.split(","):
        item = item.strip().lower()
        parts = item.split("x")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"bad shape {item!r}: expected a preset ({', '.join(PRESETS)}), a model's "
                             "config.json or KxN pairs like 4096x11008")
        shapes += _checked([(int(parts[0]), int(parts[1]))], "in --shapes")
    if not shapes:
        raise ValueError("no shapes given")
    return list(dict.fromkeys(shapes))


def bucket_edges(buckets=DEFAULT_M_BUCKETS) -> list[int]:
    """Each bucket's smallest M where it is not a bucket itself (the bucket below plus one): timed as keys
    of their own (``--m edges``, after the buckets), they let the export pick, per bucket, a variant that
    holds over the whole bucket (``export.edge_aware_picks``). A token tile that M fills in part can be
    much slower than a full one (NOTES.md row 85: 28.1 against 17.3 us), and a bucket's pick is timed only at
    its largest M."""
    ms = sorted(set(buckets))
    return [below + 1 for below, m in zip(ms, ms[1:]) if m - below >= 2]


def edge_keys(ms) -> set[int]:
    """The keys among ``ms`` that time a bucket's smallest M: one past a stored key that is not itself one
    (M=3 beside 2 and 4 is bucket 4's smallest M; 4 beside 3 is a bucket), and never M=2: 1 and 2 are both
    buckets of the default list. Buckets of one M in the table, left out of the layout choice and its
    check, which weigh the buckets themselves."""
    ms = set(ms)
    edges = set()
    for m in sorted(ms):
        if m > 2 and m - 1 in ms and m - 1 not in edges:
            edges.add(m)
    return edges


def is_edge_key(m: int, ms) -> bool:
    """Whether a key at ``m`` times a bucket's smallest M, by the keys ``ms`` stored beside it
    (``edge_keys``)."""
    return m in edge_keys(set(ms) | {m})


def bucket_edge(ms: list[int], i: int) -> int | None:
    """The key below bucket ``ms[i]`` (``ms`` sorted, distinct) where it times that bucket's smallest M
    (``edge_keys``), in a bucket that holds more M than that and its own; None where there is none."""
    if i < 1:
        return None
    edge = ms[i - 1]
    return edge if edge in edge_keys(ms) and ms[i] - edge >= 2 else None


def parse_ms(spec: str | None) -> list[int]:
    """``--m``: comma-separated M values, or ``edges`` (the default buckets' smallest M, ``bucket_edges``)."""
    if not spec:
        return list(DEFAULT_M_BUCKETS)
    if spec.strip() == "edges":
        return bucket_edges()
    return parse_counts(spec, "--m")


def parse_counts(spec: str, flag: str) -> list[int]:
    """Comma-separated positive integers (``flag`` names the option in the error), sorted, each once."""
    try:
        counts = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] <= 0:
        raise ValueError(f"bad {flag} {spec!r}: expected comma-separated positive integers")
    return counts
