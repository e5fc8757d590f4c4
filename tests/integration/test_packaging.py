"""The collection builds with ansible-galaxy, installs, and its modules are found there."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_build_install_and_document(tmp_path):
    built = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "build", str(ROOT), "--output-path", str(tmp_path)],
                           capture_output=True, text=True, check=True)
    (archive,) = tmp_path.glob("nmo-maintenance-*.tar.gz")
    assert "Created collection" in built.stdout
    listing = subprocess.run(["tar", "tzf", str(archive)], capture_output=True, text=True, check=True).stdout
    assert "plugins/modules/nmo_drain.py" in listing
    assert ".cluster/" not in listing and ".venv/" not in listing and ".cache/" not in listing
    assert ".cluster-" not in listing and ".alertmanager/" not in listing  # the other clusters (hack/test)

    target = tmp_path / "collections"
    # A HOME of its own: a copy installed in ~/.ansible/collections must not stand in for this one.
    env = {"ANSIBLE_COLLECTIONS_PATH": str(target), "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path)}
    subprocess.run([str(BIN / "ansible-galaxy"), "collection", "install", "--force", str(archive), "-p", str(target)],
                   capture_output=True, text=True, check=True, env=env)
    doc = subprocess.run([str(BIN / "ansible-doc"), "-t", "module", "-l", "nmo.maintenance"],
                         capture_output=True, text=True, check=True, env=env).stdout
    for module in ("nmo_taint", "nmo_cordon", "nmo_crd", "nmo_info", "nmo_plan", "nmo_lease", "nmo_drain", "nmo_preflight",
                   "nmo_maintenance"):
        assert f"nmo.maintenance.{module}" in doc
    assert (target / "ansible_collections" / "nmo" / "maintenance" / "roles" / "node_maintenance").is_dir()
