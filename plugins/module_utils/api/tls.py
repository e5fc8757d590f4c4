"""The TLS context of a connection, built in memory: no credential ever stays on disk.

A kubeconfig's inline ``certificate-authority-data``, ``client-certificate-data`` and
``client-key-data`` are kept as bytes. The CA goes to the context directly
(``load_verify_locations(cadata=...)``). ``load_cert_chain`` only reads paths, so the
client certificate and key are handed to it as an anonymous in-memory file
(``memfd_create``, read through ``/proc/self/fd/N``) that is gone once closed; where that
does not exist, as a 0600 file in a private 0700 directory, removed in a ``finally`` right
after loading. Nothing relies on ``atexit``: Ansible's worker processes leave through
``os._exit`` and never run it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Tuple

PROC_FD = "/proc/self/fd"

# What the verifier's reason means for the operator, and what to do (substring of the
# OpenSSL message, lower case -> hint). The strict checks are those of
# ssl.VERIFY_X509_STRICT, on by default from Python 3.13.
_HINTS: List[Tuple[str, str]] = [
    ("does not include key usage", "The CA certificate has no keyUsage extension, which strict verification "
     "(Python 3.13 and later: ssl.VERIFY_X509_STRICT) requires; make the CA again with keyUsage critical "
     "keyCertSign, cRLSign (as kubeadm does), or use the CA of a cluster made by kubeadm"),
    ("missing authority key identifier", "The server certificate has no authorityKeyIdentifier, which strict "
     "verification (Python 3.13 and later) requires; issue it again with authorityKeyIdentifier=keyid"),
    ("missing subject key identifier", "The CA certificate has no subjectKeyIdentifier, which strict "
     "verification (Python 3.13 and later) requires; make the CA again with subjectKeyIdentifier=hash"),
    ("basic constraints of ca cert not marked critical", "The CA certificate's basicConstraints is not critical, "
     "which strict verification (Python 3.13 and later) requires; make the CA again with "
     "basicConstraints=critical,CA:TRUE"),
    ("unable to get local issuer certificate", "The server's certificate is not signed by this CA: is it the CA "
     "of this cluster (the kubeconfig's certificate-authority, or ca_cert)?"),
    ("self-signed certificate in certificate chain", "The server's certificate chain ends in a CA that is not "
     "this one: is it the CA of this cluster?"),
    ("self signed certificate in certificate chain", "The server's certificate chain ends in a CA that is not "
     "this one: is it the CA of this cluster?"),
    ("self-signed certificate", "The server presents a self-signed certificate that is not the CA given"),
    ("self signed certificate", "The server presents a self-signed certificate that is not the CA given"),
    ("certificate has expired", "A certificate of the chain has expired: renew the server certificate "
     "(or the CA)"),
    ("certificate is not yet valid", "A certificate of the chain is not valid yet: check this machine's clock"),
    ("hostname mismatch", "The server's certificate is not valid for this host name: connect with a name in its "
     "subjectAltName, or set the kubeconfig's tls-server-name"),
    ("ip address mismatch", "The server's certificate is not valid for this IP address: connect with a name in "
     "its subjectAltName, or set the kubeconfig's tls-server-name"),
]


def verify_hint(reason: str) -> str:
    """What the operator can do about a certificate verification failure, '' when unknown."""
    text = reason.lower()
    for marker, hint in _HINTS:
        if marker in text:
            return hint
    return ""


def verify_reason(error: BaseException) -> Optional[str]:
    """The verifier's reason when ``error`` (or what caused it) is a certificate
    verification failure, e.g. "CA cert does not include key usage extension"; None when
    it is not one (a refused connection, a timeout)."""
    for exc in causes(error):
        if isinstance(exc, ssl.SSLCertVerificationError):
            message = getattr(exc, "verify_message", None)
            if message:
                return str(message)
            text = str(exc)
            marker = "certificate verify failed: "
            if marker in text:
                return text.split(marker, 1)[1].split(" (_ssl.c", 1)[0]
            return text
    return None


def causes(error: BaseException) -> Iterator[BaseException]:
    """``error`` and what it wraps: urllib3 keeps the cause in ``reason``, ``args[0]``,
    ``__cause__`` or ``__context__``."""
    seen: List[int] = []
    todo: List[BaseException] = [error]
    while todo:
        exc = todo.pop(0)
        if id(exc) in seen:
            continue
        seen.append(id(exc))
        yield exc
        for inner in (getattr(exc, "reason", None), exc.__cause__, exc.__context__,
                      *(a for a in exc.args if isinstance(a, BaseException))):
            if isinstance(inner, BaseException):
                todo.append(inner)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@contextmanager
def readable_path(data: bytes) -> Iterator[str]:
    """A path that reads ``data`` while the block runs, and reads nothing afterwards."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir(PROC_FD):
        fd = memfd_create("nmo-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            _write_all(fd, data)
            yield f"{PROC_FD}/{fd}"
        finally:
            os.close(fd)
        return
    directory = tempfile.mkdtemp(prefix="nmo-tls-")  # 0700, only this user can look inside
    path = os.path.join(directory, "pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        yield path
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.rmdir(directory)


@contextmanager
def _path_of(path: Optional[str], data: Optional[bytes]) -> Iterator[Optional[str]]:
    if data is not None:
        with readable_path(data) as held:
            yield held
    else:
        yield path


def context(cfg: Any) -> ssl.SSLContext:
    """The SSLContext for ``cfg`` (a kubeconfig.Configuration): verification, CA, client certificate.

    Raises ssl.SSLError or OSError when a certificate or key cannot be used.
    """
    from urllib3.util.ssl_ import create_urllib3_context

    verify = bool(getattr(cfg, "verify_ssl", True))
    ctx = create_urllib3_context(cert_reqs=ssl.CERT_REQUIRED if verify else ssl.CERT_NONE)
    if verify:
        ca_data: Optional[bytes] = getattr(cfg, "ssl_ca_data", None)
        ca_path: Optional[str] = getattr(cfg, "ssl_ca_cert", None)
        if ca_data is not None:
            ctx.load_verify_locations(cadata=ca_data.decode("ascii", errors="replace"))
        elif ca_path:
            ctx.load_verify_locations(cafile=ca_path)
        else:
            ctx.load_default_certs()
    cert_data: Optional[bytes] = getattr(cfg, "cert_data", None)
    cert_path: Optional[str] = getattr(cfg, "cert_file", None)
    key_data: Optional[bytes] = getattr(cfg, "key_data", None)
    key_path: Optional[str] = getattr(cfg, "key_file", None)
    if cert_data is not None or cert_path:
        with _path_of(cert_path, cert_data) as cert, _path_of(key_path, key_data) as key:
            ctx.load_cert_chain(cert or "", key)
    elif key_data is not None or key_path:
        raise ssl.SSLError("a client key without a client certificate: give both, or neither")
    return ctx
