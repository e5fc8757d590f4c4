"""What one node's maintenance reads, request by request, in every process of the run.

    bench/read_profile.py NODE [ansible-playbook args ...]

runs ``playbooks/maintenance.yml -l NODE`` with the environment it is given (KUBECONFIG,
K8S_AUTH_*, ANSIBLE_COLLECTIONS_PATH, an inventory with ``-i``) with the sitecustomize of
bench/read_profile/ loaded in every Python process and tracemalloc on, then prints each
request kind (method, path with the node's and namespace's names kept, query keys) with its
count, total bytes and largest response, and each process's traced peak. Run it in a small and
a large world: a read whose bytes grow with the world reads the cluster (issue 35).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def kind(method: str, url: str) -> str:
    parts = urlsplit("/" + url)
    query = dict(parse_qsl(parts.query))
    path = re.sub(r"/(namespaces)/[^/]+", r"/\1/NS", parts.path)
    shown = {k: v for k, v in query.items() if k in ("fieldSelector", "labelSelector", "watch")}
    shown = {k: re.sub(r"node-[0-9a-f]{6}-worker-\d+", "NODE", v) for k, v in shown.items()}
    path = re.sub(r"node-[0-9a-f]{6}-worker-\d+", "NODE", path)
    paged = " paged" if "limit" in query else ""
    return f"{method} {path}" + (f" {shown}" if shown else "") + paged


def main(argv: list) -> int:
    node, rest = argv[0], argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "reads.jsonl"
        env = {**os.environ, "NMO_READ_PROFILE": str(log), "PYTHONTRACEMALLOC": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE / "read_profile"), os.environ.get("PYTHONPATH")]))}
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), str(ROOT / "playbooks" / "maintenance.yml"),
               "-l", node, *rest]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    print(f"rc {done.returncode}; {len(lines)} requests")
    if done.returncode:
        print(done.stdout[-3000:])
    kinds = defaultdict(lambda: [0, 0, 0])
    peaks = defaultdict(float)
    for line in lines:
        k = kinds[kind(line["method"], line["url"])]
        k[0] += 1
        k[1] += max(line["bytes"], 0)
        k[2] = max(k[2], line["bytes"])
        peaks[line["pid"]] = max(peaks[line["pid"]], line["traced_peak_mib"])
    print(f"{'requests':>8} {'bytes':>10} {'largest':>9}  request")
    for name, (count, total, largest) in sorted(kinds.items(), key=lambda kv: -kv[1][1]):
        print(f"{count:8d} {total:10d} {largest:9d}  {name}")
    print("traced peak (tracemalloc) by process: " + ", ".join(f"{pid} {mib} MiB" for pid, mib in sorted(peaks.items())))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
