"""A request that gets no HTTP answer: a certificate that does not verify fails at once,
naming the verifier's reason, where the CA came from and what to do; a refused
connection is asked again and says so in plain words (client.connection_error, tls.py,
retry.py). The integration half is tests/integration/test_tls_failures.py."""

from __future__ import annotations

import ssl
import textwrap

import pytest
import urllib3

from ansible_collections.nmo.maintenance.plugins.module_utils.api import kubeconfig, retry, tls
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (
    Client,
    ConnectionOptions,
    _load_configuration,
    ca_source,
    connection_error,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ApiError, TlsVerifyError, Unreachable
from ansible_collections.nmo.maintenance.plugins.module_utils.model import tracking

URL = "https://10.0.0.1:6443"
KEY_USAGE = "CA cert does not include key usage extension"


def verify_failure(reason: str) -> urllib3.exceptions.SSLError:
    """What urllib3 raises for a certificate the verifier refused (as seen on Python 3.13)."""
    inner = ssl.SSLCertVerificationError(
        1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {reason} (_ssl.c:1020)")
    inner.verify_message = reason
    outer = urllib3.exceptions.SSLError(inner)
    outer.__context__ = inner
    return outer


def refused() -> urllib3.exceptions.NewConnectionError:
    error = urllib3.exceptions.NewConnectionError(
        None, "Failed to establish a new connection: [Errno 111] Connection refused")
    error.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return error


def cfg_from(tmp_path, ca_line: str = "certificate-authority: ca.crt") -> kubeconfig.Configuration:
    path = tmp_path / "config"
    path.write_text(textwrap.dedent(f"""\
        apiVersion: v1
        kind: Config
        clusters:
        - name: prod
          cluster:
            server: {URL}
            {ca_line}
        users:
        - name: u
          user: {{token: t}}
        contexts:
        - name: night-shift
          context: {{cluster: prod, user: u}}
        current-context: night-shift
        """))
    return kubeconfig.from_kubeconfig(str(path))


class TestMessages:
    def test_the_reason_the_source_and_the_key_usage_hint(self, tmp_path) -> None:
        cfg = cfg_from(tmp_path)
        error = connection_error(verify_failure(KEY_USAGE), URL, cfg, "GET", "/version")
        assert isinstance(error, TlsVerifyError) and error.status == 0
        text = error.message
        assert text.startswith(f"TLS verification of {URL} failed: certificate verify failed: {KEY_USAGE}")
        assert f"the kubeconfig {tmp_path / 'config'}, cluster 'prod' of context 'night-shift'" in text
        assert f"certificate-authority {tmp_path / 'ca.crt'}" in text
        assert "no keyUsage extension" in text and "Python 3.13" in text and "keyCertSign" in text
        assert "API server answered" not in text

    def test_inline_ca_data_is_named_as_such(self, tmp_path) -> None:
        cfg = cfg_from(tmp_path, "certificate-authority-data: Zm9v")
        error = connection_error(verify_failure("unable to get local issuer certificate"), URL, cfg)
        assert "context 'night-shift' (its certificate-authority-data)" in error.message
        assert "not signed by this CA" in error.message

    def test_the_ca_cert_option_is_named_when_it_overrides(self, tmp_path) -> None:
        (tmp_path / "ca.crt").write_text("")
        (tmp_path / "other.crt").write_text("")
        cfg_from(tmp_path)
        cfg = _load_configuration(ConnectionOptions(kubeconfig=str(tmp_path / "config"),
                                                    ca_cert=str(tmp_path / "other.crt")))
        assert ca_source(cfg) == f"ca_cert {tmp_path / 'other.crt'}"

    def test_no_ca_means_the_system_trust_store(self, tmp_path) -> None:
        cfg = cfg_from(tmp_path, "insecure-skip-tls-verify: false")
        error = connection_error(verify_failure("certificate has expired"), URL, cfg)
        assert "CA from the system's trust store" in error.message and "has expired" in error.message

    def test_an_unknown_reason_is_given_as_it_is_without_a_hint(self) -> None:
        error = connection_error(verify_failure("some new check"), URL, kubeconfig.Configuration())
        assert error.message.endswith("certificate verify failed: some new check; "
                                      "CA from the system's trust store (no CA was given)")

    @pytest.mark.parametrize("reason, words", [
        ("Missing Authority Key Identifier", "authorityKeyIdentifier"),
        ("Basic Constraints of CA cert not marked critical", "basicConstraints=critical"),
        ("Hostname mismatch, certificate is not valid for 'api.example'", "tls-server-name"),
        ("IP address mismatch, certificate is not valid for '10.0.0.1'", "subjectAltName"),
        ("self-signed certificate in certificate chain", "not this one"),
    ])
    def test_hints(self, reason: str, words: str) -> None:
        assert words in tls.verify_hint(reason)

    def test_a_refused_connection_says_so(self) -> None:
        error = connection_error(refused(), URL, kubeconfig.Configuration(), "GET", "/api/v1/nodes")
        assert isinstance(error, Unreachable) and error.status == 0
        assert error.message == f"could not connect to {URL}: connection refused (GET /api/v1/nodes)"

    def test_a_connect_timeout_says_so(self) -> None:
        error = connection_error(urllib3.exceptions.ConnectTimeoutError(None, "timed out"), URL,
                                 kubeconfig.Configuration())
        assert error.message == f"could not connect to {URL}: timed out while connecting"

    def test_a_reset_says_so(self) -> None:
        reset = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
        assert connection_error(reset, URL, kubeconfig.Configuration()).cause == "connection reset by the server"

    def test_the_reason_is_found_without_verify_message(self) -> None:
        inner = ssl.SSLCertVerificationError(
            1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {KEY_USAGE} (_ssl.c:1020)")
        assert tls.verify_reason(urllib3.exceptions.MaxRetryError(None, URL, urllib3.exceptions.SSLError(inner))) \
            == KEY_USAGE
        assert tls.verify_reason(refused()) is None


class FailingPool:
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.sent = 0

    def request(self, *_args, **_kwargs):
        self.sent += 1
        raise self.error


def client_failing_with(error: BaseException) -> Client:
    client = Client(kubeconfig.Configuration())
    client.pool = FailingPool(error)
    client.retry = retry.RetryPolicy(budget=0.5, first=0.001, cap=0.002)
    return client


class TestRetries:
    def test_a_verification_failure_is_sent_once(self) -> None:
        client = client_failing_with(verify_failure(KEY_USAGE))
        with pytest.raises(TlsVerifyError) as failed:
            client.get("/version")
        assert client.requests == 1 and client.pool.sent == 1 and failed.value.attempts == 1
        assert not retry.transient(failed.value, starting=True)
        assert client.outages.last is None  # an answering server is not "starting"

    def test_a_refused_connection_is_asked_again(self) -> None:
        client = client_failing_with(refused())
        with pytest.raises(Unreachable) as failed:
            client.get("/version")
        assert client.pool.sent > 1 and failed.value.attempts == client.pool.sent
        assert "connection refused" in failed.value.message

    def test_the_drain_gives_up_on_a_verification_failure(self) -> None:
        error: ApiError = connection_error(verify_failure(KEY_USAGE), URL, kubeconfig.Configuration())
        assert tracking.outcome_of(error, "ns/p").kind == tracking.FATAL
