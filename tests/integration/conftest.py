"""Fixtures shared by the integration tests that run as the least-privilege user."""

import pytest
from helpers import run_module

from .maintenance_support import RestrictedUser


@pytest.fixture(scope="module")
def user(cluster, tmp_path_factory):
    """A user bound only to the shipped ClusterRole (a client certificate of the local CA)."""
    installed = run_module("nmo_crd", {"object": "crd"}, cluster.kubeconfig)  # an admin installs the CRD once
    assert not installed.get("failed"), installed.get("msg")
    with RestrictedUser(cluster, tmp_path_factory.mktemp("user")) as restricted:
        assert not restricted.can("list", "secrets"), "the test user must not be an admin"
        yield restricted
