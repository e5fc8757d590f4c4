# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: nodes
short_description: The cluster's nodes as hosts, grouped by role, zone or any label
version_added: "0.3.0"
description:
  - Lists the nodes of a Kubernetes cluster (one paginated list, C(limit) and C(continue)) and
    makes each a host named after its node, with C(node_maintenance_node) set to the node's
    name, so that C(playbooks/maintenance.yml) takes the inventory as it is.
  - C(ansible_host) is the node's C(InternalIP) (see O(host_address)); a node without an address
    of that kind gets none, and Ansible reaches it by its name.
  - Groups C(control_plane) (nodes labelled C(node-role.kubernetes.io/control-plane) or
    C(node-role.kubernetes.io/master)) and C(workers) (every other node); O(keyed_groups),
    O(groups) and O(compose) make more from the host variables, as Ansible's C(constructed)
    plugin does.
  - "Host variables: C(node_maintenance_node), C(ansible_host), C(nmo_labels) (the node's labels),
    C(nmo_roles) (from its C(node-role.kubernetes.io/*) labels), C(nmo_creation_timestamp),
    C(nmo_unschedulable), C(nmo_ready), C(nmo_addresses) (by type) and C(nmo_kubelet_version)."
  - The configuration file's name must end in C(.nmo.yml) or C(.nmo.yaml).
  - Connects as the collection's modules do, with the same options and C(K8S_AUTH_*) variables
    (the C(kubernetes) package is needed only for kubeconfigs with auth providers).
author:
  - nmo.maintenance maintainers (@nmo-maintenance)
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description: The name of this plugin; it must be C(nmo.maintenance.nodes).
    required: true
    choices: [nmo.maintenance.nodes]
    type: str
  label_selector:
    description:
      - Only the nodes this label selector picks (C(node-role.kubernetes.io/worker),
        C(topology.kubernetes.io/zone in (a,b)), C(!example.com/excluded)); the API server filters.
    type: str
  host_address:
    description:
      - What C(ansible_host) is set to, V(internal_ip) (the node's C(InternalIP) address),
        V(external_ip), V(hostname) (its C(Hostname) address), or V(name) (the node's name).
    type: str
    choices: [internal_ip, external_ip, hostname, name]
    default: internal_ip
  page_size:
    description: Nodes asked for in one request of the paginated list.
    type: int
    default: 500
  kubeconfig:
    description:
      - Path of a kubeconfig file. When no connection option is given, C(KUBECONFIG) or
        C(~/.kube/config) is used, and inside a pod its service account.
    type: path
    env:
      - name: K8S_AUTH_KUBECONFIG
  context:
    description: The kubeconfig context to use.
    type: str
    env:
      - name: K8S_AUTH_CONTEXT
  host:
    description: URL of the API server.
    type: str
    env:
      - name: K8S_AUTH_HOST
  api_key:
    description: Bearer token for the API server (added to what the kubeconfig gives, as the modules do).
    type: str
    env:
      - name: K8S_AUTH_API_KEY
  validate_certs:
    description: Whether to verify the API server's certificate.
    type: bool
    aliases: [verify_ssl]
    env:
      - name: K8S_AUTH_VERIFY_SSL
  ca_cert:
    description: Path of the CA certificate that signed the API server's certificate.
    type: path
    aliases: [ssl_ca_cert]
    env:
      - name: K8S_AUTH_SSL_CA_CERT
  client_cert:
    description: Path of a client certificate.
    type: path
    aliases: [cert_file]
    env:
      - name: K8S_AUTH_CERT_FILE
  client_key:
    description: Path of the client certificate's key.
    type: path
    aliases: [key_file]
    env:
      - name: K8S_AUTH_KEY_FILE
  proxy:
    description: URL of an HTTP proxy to reach the API server through.
    type: str
    env:
      - name: K8S_AUTH_PROXY
notes:
  - One list request a page (O(page_size) nodes), whatever the number of nodes; each node is
    made a host as its page is read. With O(cache), nothing is read while the cache is fresh.
  - Needs only C(list) on C(nodes) (C(meta/rbac/)).
"""

EXAMPLES = r"""
# nodes.nmo.yml: the nodes by zone (zone_a, zone_b, ...) and pool, workers and control_plane
plugin: nmo.maintenance.nodes
keyed_groups:
  - key: nmo_labels['topology.kubernetes.io/zone'] | default('none')
    prefix: zone
  - key: nmo_labels['example.com/pool'] | default('none')
    prefix: pool
compose:
  # the hooks run on the node over SSH, as its InternalIP (the default)
  ansible_user: "'core'"
groups:
  cordoned: nmo_unschedulable

---
# workers.nmo.yml: only the workers, through a token, cached for an hour
plugin: nmo.maintenance.nodes
label_selector: "!node-role.kubernetes.io/control-plane"
host: https://api.example.com:6443
ca_cert: /etc/pki/cluster-ca.crt
cache: true
cache_plugin: ansible.builtin.jsonfile
cache_connection: ~/.cache/nmo-inventory
cache_timeout: 3600
"""

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (
    CONNECTION_ENV,
    ConnectionOptions,
    connect,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import NmoError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import inventory as hosts_of
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.node_list import each_node

SUFFIXES = (".nmo.yml", ".nmo.yaml")


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    NAME = "nmo.maintenance.nodes"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(SUFFIXES)

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        key = self.get_cache_key(path)
        use_cache = self.get_option("cache") and cache
        update_cache = self.get_option("cache") and not cache
        records = None
        if use_cache:
            try:
                records = self._cache[key]
            except KeyError:
                update_cache = True
        if records is None:
            records = self.read()
        if update_cache:
            self._cache[key] = records
        self.populate(records)

    def read(self):
        """The hosts, from one paginated node list."""
        options = ConnectionOptions.from_params({name: self.get_option(name) for name in CONNECTION_ENV})
        address = self.get_option("host_address")
        try:
            client = connect(options, pool_size=2)
            return list(each_node(client, self.get_option("label_selector"), int(self.get_option("page_size")),
                                  lambda node: hosts_of.host(node, address)))
        except NmoError as exc:
            raise AnsibleParserError(f"nmo.maintenance.nodes: {exc.message}") from None

    def populate(self, records):
        strict = self.get_option("strict")
        for group in (hosts_of.CONTROL_PLANE, hosts_of.WORKERS):
            self.inventory.add_group(group)
        for record in records:
            name = self.inventory.add_host(record["name"])
            for group in record["groups"]:
                self.inventory.add_child(group, name)
            for var, value in record["vars"].items():
                self.inventory.set_variable(name, var, value)
            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)
