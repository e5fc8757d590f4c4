"""The filter that names each host's Kubernetes node."""

from ansible_collections.nmo.maintenance.plugins.filter.node_names import FilterModule, node_names


def test_a_host_names_its_node_or_is_named_after_itself():
    hostvars = {"w1": {"node_maintenance_node": "node-a"}, "w2": {}, "w3": {"node_maintenance_node": ""}}
    assert node_names(["w1", "w2", "w3", "w4"], hostvars) == ["node-a", "w2", "w3", "w4"]


def test_the_order_is_the_hosts_order():
    hostvars = {h: {"node_maintenance_node": f"n-{h}"} for h in ("b", "a", "c")}
    assert node_names(["c", "a", "b"], hostvars) == ["n-c", "n-a", "n-b"]


def test_it_is_the_collections_filter():
    assert FilterModule().filters()["node_names"] is node_names
