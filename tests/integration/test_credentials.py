"""No credential material is left anywhere after a run.

Inline kubeconfig data (``certificate-authority-data``, ``client-certificate-data``,
``client-key-data``) used to be written to temp files removed ``atexit``, which Ansible's
workers never run. Each run here points TMPDIR (and Ansible's own temp folders) at an empty
folder, and then looks at every file left there for the key.
"""

from __future__ import annotations

import base64
import json
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest
import yaml
from helpers import run_module, run_playbook

pytestmark = [pytest.mark.cluster]

PATHS = {"in-process": {}, "shipped": {"NMO_MAINTENANCE_IN_PROCESS": "false"}}


def admin_files(cluster) -> Dict[str, bytes]:
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    cluster_entry, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    return {"server": cluster_entry["server"].encode(),
            "ca": Path(cluster_entry["certificate-authority"]).read_bytes(),
            "cert": Path(user["client-certificate"]).read_bytes(),
            "key": Path(user["client-key"]).read_bytes()}


def kubeconfig_with(folder: Path, files: Dict[str, bytes], user: Dict) -> str:
    cluster_entry = {"server": files["server"].decode(),
                     "certificate-authority-data": base64.b64encode(files["ca"]).decode()}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "inline",
           "clusters": [{"name": "c", "cluster": cluster_entry}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "inline", "context": {"cluster": "c", "user": "u"}}]}
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return str(path)


def inline_kubeconfig(folder: Path, files: Dict[str, bytes]) -> str:
    """The admin's kubeconfig with every file inlined as base64 data."""
    return kubeconfig_with(folder, files, {"client-certificate-data": base64.b64encode(files["cert"]).decode(),
                                           "client-key-data": base64.b64encode(files["key"]).decode()})


def exec_kubeconfig(folder: Path, files: Dict[str, bytes]) -> str:
    """An exec credential plugin that hands out the admin's certificate and key: read by the
    kubernetes package, which writes them (and the inline CA) to temp files of its own."""
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"clientCertificateData": files["cert"].decode(), "clientKeyData": files["key"].decode()}}
    plugin = folder / "credential-plugin.py"
    plugin.write_text(textwrap.dedent(f"""\
        import json
        print(json.dumps({json.dumps(credential)}))
        """))
    return kubeconfig_with(folder, files, {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                    "command": sys.executable, "args": [str(plugin)],
                                                    "interactiveMode": "Never"}})


def empty_tmp(tmp_path: Path) -> Dict[str, str]:
    """TMPDIR and Ansible's local and remote temp folders, all inside one empty folder."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    return {"TMPDIR": str(tmp), "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-local"),
            "ANSIBLE_REMOTE_TEMP": str(tmp / "ansible-remote")}


def leftovers(env: Dict[str, str], secrets: List[bytes]) -> List[str]:
    """Every file left in the temp folder, and those holding a secret (in any encoding we know)."""
    tmp = Path(env["TMPDIR"])
    forms = [s for secret in secrets for s in (secret, base64.b64encode(secret), secret.strip().splitlines()[1])]
    found = []
    for path in tmp.rglob("*"):
        if path.is_file() or path.is_symlink():
            content = path.read_bytes() if path.is_file() else b""
            holds = [f for f in forms if f and f in content]
            found.append(f"{path.relative_to(tmp)}{' (holds a secret)' if holds else ''}")
    return found


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("kind", ["inline", "exec"])
def test_a_module_leaves_no_file_behind(cluster, world, tmp_path, path, kind):
    (node,) = world.add_nodes(workers=1)
    files = admin_files(cluster)
    make = inline_kubeconfig if kind == "inline" else exec_kubeconfig
    kubeconfig = make(tmp_path, files)
    env = {**empty_tmp(tmp_path), **PATHS[path]}

    result = run_module("nmo_info", {"node": node, "events_limit": 0}, kubeconfig, env=env)

    assert not result.get("failed"), result.get("msg")
    assert [n["node"] for n in result["nodes"]] == [node], "the module did not reach the cluster"
    assert leftovers(env, [files["key"]]) == [], "files were left in the temp folder"


@pytest.mark.parametrize("path", list(PATHS))
def test_a_playbook_leaves_no_file_behind(cluster, world, tmp_path, path):
    """Begin, drain and end of one node, each task a module with the inline kubeconfig."""
    (node,) = world.add_nodes(workers=1)
    world.deployment("web", 1)
    files = admin_files(cluster)
    kubeconfig = inline_kubeconfig(tmp_path, files)
    env = {**empty_tmp(tmp_path), **PATHS[path]}
    prefix = f"t{world.id}-slot"
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "begin", "nmo.maintenance.nmo_maintenance": {"node": node, "install_crd": True, "slot_prefix": prefix}},
        {"name": "drain", "nmo.maintenance.nmo_drain": {"node": node, "timeout": 60}},
        {"name": "end", "nmo.maintenance.nmo_maintenance": {"node": node, "state": "absent", "slot_prefix": prefix}}]}]

    run = run_playbook(play, kubeconfig, env=env)

    assert run.rc == 0, run.stdout[-3000:]
    assert [r["task"] for r in run.records if r["status"] == "ok"] == ["begin", "drain", "end"]
    assert not cluster.client.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"), "end did not run"
    assert leftovers(env, [files["key"]]) == [], "files were left in the temp folder"


@pytest.mark.parametrize("path", list(PATHS))
def test_api_key_beside_a_kubeconfig_certificate_is_sent_as_kubernetes_core_does_and_warned(cluster, world, path):
    """kubernetes.core adds api_key to what the kubeconfig gives; the API server then
    authenticates the client certificate and ignores the token. Same here, and said."""
    (node,) = world.add_nodes(workers=1)
    result = run_module("nmo_info", {"node": node, "events_limit": 0, "api_key": "not-a-valid-token"},
                        cluster.kubeconfig, env=PATHS[path])
    assert not result.get("failed"), result.get("msg")  # the certificate authenticated: the token was not used
    assert [n["node"] for n in result["nodes"]] == [node]
    warned = [w for w in result.get("warnings", []) if "api_key is sent together with" in w]
    assert warned and "the token is not used" in warned[0], result.get("warnings")
    assert "not-a-valid-token" not in result["_stdout"]
