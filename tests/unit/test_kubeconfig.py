"""Reading kubeconfigs without the kubernetes package, and handing off what it cannot read."""

import base64

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils.api import kubeconfig
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, _load_configuration
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ConnectionConfigError


def write(tmp_path, users, cluster=None, current="main"):
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6443",
                                                          "certificate-authority": "pki/ca.crt"}}],
        "users": [{"name": name, "user": user} for name, user in users.items()],
        "contexts": [{"name": name, "context": {"cluster": "c", "user": name}} for name in users],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_certificates_relative_to_the_kubeconfig(tmp_path):
    path = write(tmp_path, {"main": {"client-certificate": "pki/admin.crt", "client-key": "/abs/admin.key"}})
    cfg = kubeconfig.from_kubeconfig(path)
    assert cfg.host == "https://127.0.0.1:6443"
    assert cfg.ssl_ca_cert == str(tmp_path / "pki" / "ca.crt")
    assert cfg.cert_file == str(tmp_path / "pki" / "admin.crt")
    assert cfg.key_file == "/abs/admin.key"
    assert cfg.verify_ssl and cfg.get_api_key_with_prefix("authorization") is None


def test_inline_data_and_token_and_context(tmp_path):
    ca = base64.b64encode(b"CA PEM").decode()
    path = write(tmp_path, {"main": {"token": "abc"}, "other": {"client-certificate-data": ca, "client-key-data": ca}},
                 cluster={"server": "https://k", "certificate-authority-data": ca, "insecure-skip-tls-verify": True})
    cfg = kubeconfig.from_kubeconfig(path)
    assert cfg.get_api_key_with_prefix("authorization") == "Bearer abc"
    assert not cfg.verify_ssl
    # inline data stays in memory: no path to a file that could outlive the process
    assert cfg.ssl_ca_data == b"CA PEM" and cfg.ssl_ca_cert is None
    other = kubeconfig.from_kubeconfig(path, "other")
    assert other.cert_data == b"CA PEM" and other.key_data == b"CA PEM"
    assert other.cert_file is None and other.key_file is None


def test_auth_providers_are_left_to_the_kubernetes_package_naming_the_user(tmp_path):
    path = write(tmp_path, {"main": {"auth-provider": {"name": "oidc", "config": {"id-token": "x"}}}})
    with pytest.raises(kubeconfig.Unsupported) as raised:
        kubeconfig.from_kubeconfig(path)
    assert raised.value.user == f"'main' (context 'main' of the kubeconfig {path})"


def test_unknown_context_is_a_clear_error(tmp_path):
    path = write(tmp_path, {"main": {"token": "abc"}})
    with pytest.raises(ConnectionConfigError, match="context 'nope' not found"):
        _load_configuration(ConnectionOptions(kubeconfig=path, context="nope"))


def test_options_override_the_kubeconfig(tmp_path):
    path = write(tmp_path, {"main": {"token": "abc"}}, cluster={"server": "https://k"})
    cfg = _load_configuration(ConnectionOptions(kubeconfig=path, host="https://other", api_key="xyz",
                                                validate_certs=False))
    assert cfg.host == "https://other" and cfg.get_api_key_with_prefix("authorization") == "Bearer xyz"
    assert not cfg.verify_ssl


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConnectionConfigError, match="cannot load the cluster configuration"):
        _load_configuration(ConnectionOptions(kubeconfig=str(tmp_path / "absent")))
