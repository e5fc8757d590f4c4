"""B8's "parse alone": the inventory plugin nmo.maintenance.nodes loaded as Ansible loads it and
its parse of one configuration file timed in this process; prints one JSON line (seconds,
hosts, groups, this process's RSS before the parse and its peak after, MiB).

    python bench/inventory_parse.py world.nmo.yml
"""

from __future__ import annotations

import json
import sys
import time


def rss_mib(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def main(path: str) -> int:
    from ansible.inventory.data import InventoryData
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import init_plugin_loader, inventory_loader

    init_plugin_loader()
    plugin = inventory_loader.get("nmo.maintenance.nodes")
    inventory, loader = InventoryData(), DataLoader()
    assert plugin.verify_file(path), f"{path}: not a file of the plugin"
    before = rss_mib("VmRSS")
    t0 = time.monotonic()
    plugin.parse(inventory, loader, path, cache=False)
    took = time.monotonic() - t0
    print(json.dumps({"parse_s": round(took, 3), "hosts": len(inventory.hosts), "groups": len(inventory.groups),
                      "rss_before_mib": before, "rss_after_mib": rss_mib("VmRSS"), "peak_mib": rss_mib("VmHWM")}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
