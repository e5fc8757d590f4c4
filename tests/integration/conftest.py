"""Fixtures shared by the integration tests: the CRD installed, the least-privilege user."""

import pytest
from helpers import run_module

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import Conflict
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd

from .maintenance_support import RestrictedUser


@pytest.fixture(scope="module")
def crd_installed(cluster):
    """The NodeMaintenance CRD, installed (or brought up to date) as the admin, through the core.
    (test_core_modules has its own: there, installing it through nmo_crd is what is tested.)"""
    for _attempt in range(3):
        try:
            crd.ensure(cluster.client)
            return
        except Conflict:  # another test wrote it meanwhile
            continue


@pytest.fixture(scope="module")
def user(cluster, tmp_path_factory):
    """A user bound only to the shipped ClusterRole (a client certificate of the local CA)."""
    installed = run_module("nmo_crd", {"object": "crd"}, cluster.kubeconfig)  # an admin installs the CRD once
    assert not installed.get("failed"), installed.get("msg")
    with RestrictedUser(cluster, tmp_path_factory.mktemp("user")) as restricted:
        assert not restricted.can("list", "secrets"), "the test user must not be an admin"
        yield restricted
