"""Running the collection through Ansible in tests, the way users run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS = ROOT / ".cache" / "collections"


def collection_path() -> Path:
    """An ansible_collections tree whose nmo/maintenance is this checkout, or the one named by
    NMO_COLLECTIONS_PATH (hack/compat: the collection installed from its built tarball)."""
    if os.environ.get("NMO_COLLECTIONS_PATH"):
        return Path(os.environ["NMO_COLLECTIONS_PATH"])
    link = COLLECTIONS / "ansible_collections" / "nmo" / "maintenance"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        try:
            link.symlink_to(ROOT)
        except FileExistsError:
            pass
    return COLLECTIONS


def ansible_env(kubeconfig: Optional[str] = None, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": str(collection_path()),
        "ANSIBLE_CALLBACK_PLUGINS": str(ROOT / "tests" / "plugins" / "callback"),
        "ANSIBLE_CALLBACKS_ENABLED": "nmo_record",
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_LOCALHOST_WARNING": "False",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
    })
    if kubeconfig:
        env["K8S_AUTH_KUBECONFIG"] = kubeconfig
    env.update(extra or {})
    return env


class PlaybookRun:
    def __init__(self, proc: subprocess.CompletedProcess, records: List[Dict[str, Any]]) -> None:
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.records = records

    def results(self, action_suffix: str = "") -> List[Dict[str, Any]]:
        found = []
        for r in self.records:
            if r["action"].endswith(action_suffix):
                # ansible-core 2.19 leaves `failed` out of an ignored failure's result: the status says it.
                r["result"].setdefault("failed", r["status"] == "failed")
                found.append(r["result"])
        return found

    def last(self, action_suffix: str = "") -> Dict[str, Any]:
        found = self.results(action_suffix)
        assert found, f"no result for {action_suffix!r}; rc={self.rc}\n{self.stdout[-3000:]}\n{self.stderr[-2000:]}"
        return found[-1]


def run_playbook(plays: Any, kubeconfig: Optional[str] = None, args: Optional[List[str]] = None,
                 env: Optional[Dict[str, str]] = None, inventory: Optional[str] = None,
                 timeout: float = 600, playbook_path: Optional[str] = None) -> PlaybookRun:
    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "records.jsonl"
        if playbook_path is None:
            path = Path(tmp) / "play.yml"
            path.write_text(yaml.safe_dump(plays, sort_keys=False))
            playbook_path = str(path)
        cmd = [str(Path(sys.executable).parent / "ansible-playbook"), playbook_path]
        cmd += ["-i", inventory or "localhost,", *(args or [])]
        if inventory is None:
            cmd += ["-c", "local"]
        e = ansible_env(kubeconfig, env)
        e["NMO_RECORD_FILE"] = str(record)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=timeout, cwd=str(ROOT), check=False)
        records = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    return PlaybookRun(proc, records)


def run_module(module: str, args: Dict[str, Any], kubeconfig: Optional[str] = None, check: bool = False,
               diff: bool = False, env: Optional[Dict[str, str]] = None, verbose: bool = False) -> Dict[str, Any]:
    """Run one module on localhost through ansible-playbook; return its result dict."""
    name = module if "." in module else f"nmo.maintenance.{module}"
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "under test", name: args, "ignore_errors": True}]}]
    flags = (["--check"] if check else []) + (["--diff"] if diff else []) + (["-vvv"] if verbose else [])
    run = run_playbook(play, kubeconfig, flags, env)
    result = run.last(name.rsplit(".", 1)[-1])
    result["_stdout"] = run.stdout
    return result
