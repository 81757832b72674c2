"""``benchmarks/changed_picks.py``: what the device scripts print after an export, the picks that differ
from the packaged table of the same GPU."""
import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import changed_picks  # noqa: E402


def test_changed_picks_names_each_changed_and_new_bucket_of_the_gpus_packaged_table():
    table = json.loads((ROOT / "tunesearch/tables/h100.json").read_text())
    assert changed_picks.changed_picks(table) == []  # the packaged table against itself
    new = copy.deepcopy(table)
    buckets = new["gpus"]["NVIDIA H100 80GB HBM3"]["shapes"]["4096x11008"]["buckets"]
    first = buckets[0]
    was = first["variant"]["id"]
    first["variant"]["id"] = was + ".skew4"
    buckets.append({**copy.deepcopy(first), "m_max": 99999})
    assert changed_picks.changed_picks(new) == [
        f"4096x11008 M={first['m_max']}: {was} {first['us']} -> {was}.skew4 {first['us']}",
        f"4096x11008 M=99999: (new) {was}.skew4 {first['us']}"]
    new["gpus"] = {"a GPU with no packaged table": new["gpus"]["NVIDIA H100 80GB HBM3"]}
    assert changed_picks.changed_picks(new) == []
