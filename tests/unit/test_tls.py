"""TLS contexts built in memory: inline certificates and keys never stay on disk."""

from __future__ import annotations

import base64
import os
import ssl
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, Iterator

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils.api import kubeconfig, tls
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (
    Client,
    ConnectionOptions,
    _load_configuration,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ConnectionConfigError


@pytest.fixture(scope="module")
def pem(tmp_path_factory) -> Dict[str, bytes]:
    """A self-signed certificate and its key (made by openssl, as hack/user-kubeconfig does)."""
    folder = tmp_path_factory.mktemp("pki")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(folder / "k.pem"), "-out", str(folder / "c.pem"), "-subj", "/CN=nmo-test",
                    "-days", "1"], check=True, capture_output=True)
    return {"cert": (folder / "c.pem").read_bytes(), "key": (folder / "k.pem").read_bytes()}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Iterator[Path]:
    """An empty folder as the process's temp dir: whatever tempfile writes lands there."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder


def inline_kubeconfig(tmp_path: Path, pem: Dict[str, bytes], **user: str) -> str:
    b64 = {k: base64.b64encode(v).decode() for k, v in pem.items()}
    entry = {"server": "https://127.0.0.1:1", "certificate-authority-data": b64["cert"]}
    inline = {"client-certificate-data": b64["cert"], "client-key-data": b64["key"]}
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "main",
           "clusters": [{"name": "c", "cluster": entry}],
           "users": [{"name": "u", "user": user or inline}],
           "contexts": [{"name": "main", "context": {"cluster": "c", "user": "u"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_readable_path_holds_the_data_only_inside_the_block(private_tmp):
    with tls.readable_path(b"secret") as path, open(path, "rb") as handle:
        assert handle.read() == b"secret"
    assert list(private_tmp.iterdir()) == []
    if path.startswith(tls.PROC_FD):  # memfd: the descriptor is closed, the memory gone
        fd = int(path.rsplit("/", 1)[1])
        with pytest.raises(OSError):
            os.fstat(fd)


def test_readable_path_fallback_is_private_and_removed(private_tmp, monkeypatch):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    with tls.readable_path(b"secret") as path:
        assert Path(path).parent.parent == private_tmp
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(Path(path).parent).st_mode) == 0o700
    assert list(private_tmp.iterdir()) == []


def test_readable_path_fallback_is_removed_when_loading_fails(private_tmp, monkeypatch):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    with pytest.raises(RuntimeError), tls.readable_path(b"secret"):
        raise RuntimeError("load_cert_chain failed")
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "private-file"])
def test_inline_client_certificate_builds_a_context_and_leaves_nothing(tmp_path, private_tmp, pem, monkeypatch, memfd):
    if not memfd:
        monkeypatch.delattr(os, "memfd_create", raising=False)
    cfg = _load_configuration(ConnectionOptions(kubeconfig=inline_kubeconfig(tmp_path, pem)))
    assert cfg.cert_data == pem["cert"] and cfg.key_data == pem["key"] and cfg.ssl_ca_data == pem["cert"]
    ctx = tls.context(cfg)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.get_ca_certs() and ctx.get_ca_certs()[0]["subject"] == ((("commonName", "nmo-test"),),)
    client = Client(cfg)
    assert client.pool.connection_pool_kw["ssl_context"] is not None
    assert list(private_tmp.iterdir()) == [], "a credential was left in the temp dir"


def test_unverified_context_skips_the_ca(tmp_path, pem):
    cfg = kubeconfig.Configuration()
    cfg.host, cfg.verify_ssl, cfg.ssl_ca_data = "https://k", False, b"not a certificate"
    ctx = tls.context(cfg)
    assert ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


def test_a_bad_key_is_a_connection_error_naming_the_options(tmp_path, private_tmp, pem):
    cfg = kubeconfig.Configuration()
    cfg.host, cfg.cert_data, cfg.key_data = "https://k", pem["cert"], b"-----BEGIN PRIVATE KEY-----\nAAAA\n"
    with pytest.raises(ConnectionConfigError, match="client_key"):
        Client(cfg)
    assert list(private_tmp.iterdir()) == []


def test_a_key_without_a_certificate_is_refused():
    cfg = kubeconfig.Configuration()
    cfg.host, cfg.key_data = "https://k", b"key"
    with pytest.raises(ConnectionConfigError, match="without a client certificate"):
        Client(cfg)


def test_invalid_base64_is_named(tmp_path):
    path = tmp_path / "kc"
    path.write_text(yaml.safe_dump({"current-context": "m", "clusters": [{"name": "c", "cluster": {
        "server": "https://k", "certificate-authority-data": "%%%"}}], "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "m", "context": {"cluster": "c", "user": "u"}}]}))
    with pytest.raises(ConnectionConfigError, match="certificate-authority-data in the kubeconfig is not valid base64"):
        _load_configuration(ConnectionOptions(kubeconfig=str(path)))


def test_exec_plugin_kubeconfig_leaves_no_temp_file_and_sends_its_token(tmp_path, private_tmp, pem):
    """The kubernetes package writes inline data to temp files removed only atexit; they are
    read into memory and deleted at once, and the plugin's token is what the client sends."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(textwrap.dedent("""\
        import json
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                          "status": {"token": "t0ken-from-exec"}}))
        """))
    path = inline_kubeconfig(tmp_path, pem, exec={"apiVersion": "client.authentication.k8s.io/v1",
                                                  "command": sys.executable, "args": [str(plugin)],
                                                  "interactiveMode": "Never"})
    cfg = _load_configuration(ConnectionOptions(kubeconfig=path))
    assert cfg.ssl_ca_data == pem["cert"] and cfg.ssl_ca_cert is None
    assert list(private_tmp.iterdir()) == [], "the kubernetes package's temp files were left"
    client = Client(cfg)
    assert client._headers(None)["Authorization"] == "Bearer t0ken-from-exec"
    assert list(private_tmp.iterdir()) == []


def test_kubernetes_temp_files_are_taken_into_memory(private_tmp):
    from kubernetes.config import kube_config

    path = kube_config._create_temp_file_with_content(b"KEY DATA")
    assert Path(path).parent == private_tmp
    taken = kubeconfig.take_kubernetes_temp_files()
    assert taken == {path: b"KEY DATA"} and not Path(path).exists() and kube_config._temp_files == {}


def test_api_key_beside_a_client_certificate_warns(tmp_path, pem):
    cfg = _load_configuration(ConnectionOptions(kubeconfig=inline_kubeconfig(tmp_path, pem), api_key="tok"))
    assert cfg.get_api_key_with_prefix("authorization") == "Bearer tok"
    assert cfg.cert_data == pem["cert"], "kept, as kubernetes.core keeps it"
    assert len(cfg.warnings) == 1 and "the token is not used" in cfg.warnings[0]
    assert Client(cfg).warnings == cfg.warnings
    alone = _load_configuration(ConnectionOptions(host="https://k", api_key="tok"))
    assert alone.warnings == []
