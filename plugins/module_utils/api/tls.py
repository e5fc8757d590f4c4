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
from typing import Any, Iterator, Optional

PROC_FD = "/proc/self/fd"


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
