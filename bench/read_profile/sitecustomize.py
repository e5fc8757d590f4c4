"""Loaded by every Python process of a profiled run (bench/read_profile.py puts this folder on
PYTHONPATH): each API response a process reads whole is logged with its size and the process's
traced memory (tracemalloc, started by PYTHONTRACEMALLOC) after it, one JSON line a request, to
$NMO_READ_PROFILE. Watches (streamed, preload_content=False) are logged without a size."""

import json
import os
import time
import tracemalloc

try:
    import urllib3
except ImportError:  # a Python without it makes no API requests
    urllib3 = None

_OUT = os.environ.get("NMO_READ_PROFILE")

if urllib3 is not None and _OUT:
    _original = urllib3.PoolManager.request

    def _request(self, method, url, *args, **kwargs):
        resp = _original(self, method, url, *args, **kwargs)
        streamed = kwargs.get("preload_content", True) is False
        size = -1 if streamed else len(resp.data or b"")
        current, peak = tracemalloc.get_traced_memory() if tracemalloc.is_tracing() else (0, 0)
        line = {"pid": os.getpid(), "ppid": os.getppid(), "at": time.time(), "method": method,
                "url": url.split("://", 1)[-1].split("/", 1)[-1], "bytes": size, "status": resp.status,
                "traced_mib": round(current / 2**20, 1), "traced_peak_mib": round(peak / 2**20, 1)}
        with open(_OUT, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
        return resp

    urllib3.PoolManager.request = _request
