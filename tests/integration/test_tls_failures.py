"""TLS against the real local API server: its PKI passes strict verification (as Python 3.13
does by default), a wrong CA fails on the first attempt naming the verifier's reason and the
kubeconfig entry it came from, a CA without keyUsage under strict verification names that
cause, and a refused connection is asked again and says so (issue 22, issue 23)."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils.api import retry
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (
    Client,
    ConnectionOptions,
    _load_configuration,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import TlsVerifyError, Unreachable


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def ca_certificate(folder: Path, name: str, key: Path, key_usage: bool) -> Path:
    """A CA certificate for ``key`` (subject CN=nmo-local-ca, as the cluster's), with or without keyUsage."""
    config = folder / f"{name}.cnf"
    lines = ["[req]", "distinguished_name=dn", "x509_extensions=ca", "[dn]", "[ca]",
             "basicConstraints=critical,CA:TRUE", "subjectKeyIdentifier=hash"]
    if key_usage:
        lines.append("keyUsage=critical,digitalSignature,keyCertSign,cRLSign")
    config.write_text("\n".join(lines) + "\n")
    out = folder / f"{name}.crt"
    openssl("req", "-x509", "-new", "-key", str(key), "-subj", "/CN=nmo-local-ca", "-days", "1",
            "-config", str(config), "-out", str(out))
    return out


def kubeconfig_with_ca(cluster, folder: Path, ca: Path) -> Path:
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    doc["clusters"][0]["cluster"]["certificate-authority"] = str(ca)
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def client_for(kubeconfig: Path) -> Client:
    """A client of its own (not the per-process cache of ``connect``), never retrying past 10 s."""
    client = Client(_load_configuration(ConnectionOptions(kubeconfig=str(kubeconfig))))
    client.retry = retry.RetryPolicy(budget=10.0)
    return client


def strict(client: Client) -> None:
    """What Python 3.13 sets by default, set here explicitly so the test means the same on 3.11."""
    client.pool.connection_pool_kw["ssl_context"].verify_flags |= ssl.VERIFY_X509_STRICT


def test_the_local_ca_passes_strict_verification(cluster) -> None:
    client = Client(cluster.client.configuration)
    strict(client)
    assert client.get("/version")["gitVersion"]


def test_python_313_reaches_the_local_api_server_with_its_defaults(cluster) -> None:
    prefix = subprocess.run(["pyenv", "prefix", "3.13.0"], capture_output=True, text=True, check=False) \
        if shutil.which("pyenv") else None
    python = Path(prefix.stdout.strip()) / "bin" / "python3" if prefix and prefix.returncode == 0 else None
    if python is None or not python.exists():
        pytest.skip("no Python 3.13 on this machine (pyenv prefix 3.13.0)")
    pki = Path(cluster.dir) / "pki"
    # ssl.create_default_context: VERIFY_X509_STRICT on 3.13; the flag is asserted, not assumed
    script = (
        "import ssl, sys, urllib.request\n"
        "ctx = ssl.create_default_context(cafile=sys.argv[2])\n"
        "assert ctx.verify_flags & ssl.VERIFY_X509_STRICT\n"
        "ctx.load_cert_chain(sys.argv[3], sys.argv[4])\n"
        "print(urllib.request.urlopen(sys.argv[1] + '/version', context=ctx, timeout=10).status)\n")
    done = subprocess.run([str(python), "-c", script, cluster.api, str(pki / "ca.crt"), str(pki / "admin.crt"),
                           str(pki / "admin.key")], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "200", done.stderr[-2000:]


def test_a_wrong_ca_fails_on_the_first_attempt_naming_reason_and_source(cluster, tmp_path) -> None:
    openssl("genrsa", "-out", str(tmp_path / "other.key"), "2048")
    other = ca_certificate(tmp_path, "other", tmp_path / "other.key", key_usage=True)
    kubeconfig = kubeconfig_with_ca(cluster, tmp_path, other)
    client = client_for(kubeconfig)
    with pytest.raises(TlsVerifyError) as failed:
        client.get("/api/v1/nodes")
    text = failed.value.message
    assert client.requests == 1 and failed.value.attempts == 1, text  # never asked again
    assert f"TLS verification of {cluster.api} failed: certificate verify failed: " in text
    assert "unable to get local issuer certificate" in text
    assert f"CA from the kubeconfig {kubeconfig}, cluster 'nmo-local' of context 'nmo-local'" in text
    assert f"(certificate-authority {other})" in text
    assert "not signed by this CA" in text
    assert "API server answered" not in text


def test_a_ca_without_key_usage_under_strict_verification_names_that_cause(cluster, tmp_path) -> None:
    # The cluster's own CA key and subject: the chain is right, only the keyUsage is missing.
    bare = ca_certificate(tmp_path, "bare", Path(cluster.dir) / "pki" / "ca.key", key_usage=False)
    kubeconfig = kubeconfig_with_ca(cluster, tmp_path, bare)
    lenient = client_for(kubeconfig)
    assert lenient.get("/version")["gitVersion"]  # without the strict flag it verifies

    client = client_for(kubeconfig)
    strict(client)
    with pytest.raises(TlsVerifyError) as failed:
        client.get("/version")
    text = failed.value.message
    assert client.requests == 1 and failed.value.attempts == 1, text
    assert "certificate verify failed: CA cert does not include key usage extension" in text
    assert f"CA from the kubeconfig {kubeconfig}, cluster 'nmo-local' of context 'nmo-local'" in text
    assert "no keyUsage extension" in text and "Python 3.13" in text


def test_a_refused_connection_is_asked_again_and_says_so(cluster, tmp_path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    doc = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    doc["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    client = client_for(path)
    client.retry = retry.RetryPolicy(budget=1.0, first=0.05, cap=0.1)
    with pytest.raises(Unreachable) as failed:
        client.get("/version")
    assert failed.value.message == f"could not connect to https://127.0.0.1:{port}: connection refused (GET /version)"
    assert failed.value.attempts > 1 and client.requests == failed.value.attempts
