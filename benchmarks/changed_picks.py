"""The picks of a newly exported table that differ from the packaged table of its GPU:
`python benchmarks/changed_picks.py NEW_TABLE.json`, a line a bucket, "(new)" where the packaged table has
no such bucket (a key at a bucket's smallest M, swept with --m edges). Prints nothing where the packaged
tables hold no table of that GPU. Used by the device scripts after their export (device_resume.sh,
device_new_gpu.sh)."""
import json
import sys
from pathlib import Path

TABLES = Path(__file__).resolve().parents[1] / "tunesearch/tables"


def changed_picks(new: dict) -> list[str]:
    packaged = [json.loads(p.read_text())["gpus"] for p in sorted(TABLES.glob("*.json"))]
    lines = []
    for gpu, entry in new["gpus"].items():
        old = next((gpus[gpu]["shapes"] for gpus in packaged if gpu in gpus), None)
        if old is None:
            continue
        for shape, table in entry["shapes"].items():
            before = {b["m_max"]: b for b in old.get(shape, {}).get("buckets", [])}
            for b in table["buckets"]:
                o = before.get(b["m_max"])
                if o is None:
                    lines.append(f"{shape} M={b['m_max']}: (new) {b['variant']['id']} {b['us']}")
                elif o["variant"]["id"] != b["variant"]["id"]:
                    lines.append(f"{shape} M={b['m_max']}: {o['variant']['id']} {o['us']} -> "
                                 f"{b['variant']['id']} {b['us']}")
    return lines


if __name__ == "__main__":
    for line in changed_picks(json.loads(Path(sys.argv[1]).read_text())):
        print(line)
