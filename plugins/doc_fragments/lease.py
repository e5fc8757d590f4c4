# The lease and etcd-guard options of nmo_lease and nmo_maintenance
# (module_utils/specs.py, LEASE; defaults from disruption.Request).


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  concurrency:
    description:
      - How many nodes may be under maintenance at once, across every run against the cluster.
        From 1 to 1000.
    type: int
    default: 1
  duration:
    description:
      - Seconds a lease (and a slot) stays valid without renewal. Acquiring again renews it.
      - From 30 to 604800 (a week). C(leaseDurationSeconds) is an int32, and a lease keeps Node
        Health Check and Self Node Remediation away from the node until it lapses, also when the
        run that took it died; a longer one is a mistake, not a plan.
      - The shortest, 30, is what the run's heartbeat (M(nmo.maintenance.nmo_run)) can keep. It
        renews a lease every 10 s once half of it (or three beats) is left, so a lease of 30 s is
        renewed every third of it, and still outlives a renewal that fails once (its request
        retried for 10 s, a pause of 1 s, 3 s for the clocks). A shorter one is refused before
        anything is written.
    type: int
    default: 3600
  slot_prefix:
    description:
      - Slot leases are named C(<slot_prefix>-0) to C(<slot_prefix>-<concurrency - 1>).
        Runs that must share the limit use the same prefix. Lower-case letters, digits, C(-) and
        C(.), starting with a letter or digit, not C(node-) (those are node leases).
    type: str
    default: nmo-maintenance-slot
  wait:
    description:
      - V(true) keeps trying until acquired or O(timeout), watching the leases (and the etcd
        pods or guard PDB); V(false) fails at once, naming who holds what.
      - M(nmo.maintenance.nmo_maintenance) waits only with O(nmo.maintenance.nmo_maintenance#module:state=present).
    type: bool
    default: false
  timeout:
    description: Seconds to wait for the leases with O(wait=true), from 0 to 604800.
    type: float
    default: 600
  etcd_guard:
    description:
      - Which etcd quorum guard applies to control-plane nodes. V(auto) picks V(openshift)
        when O(etcd_guard_namespace) exists, else V(kubeadm) when etcd pods exist, else
        V(none). V(none) skips the guard (external etcd), with a warning.
    type: str
    choices: [auto, kubeadm, openshift, none]
    default: auto
  etcd_pod_selector:
    description: Label selector of the etcd pods (kubeadm flavour).
    type: str
    default: component=etcd
  etcd_pod_namespace:
    description: Namespace of the etcd pods (kubeadm flavour).
    type: str
    default: kube-system
  etcd_guard_namespace:
    description: Namespace of the etcd guard PodDisruptionBudget and pods (OpenShift flavour).
    type: str
    default: openshift-etcd
  budgets:
    description:
      - >-
        Topology budgets, besides O(concurrency), counted across every run against the cluster (and, in
        operator mode, every C(NodeMaintenance) NMO works on). Each is a dict, either
        C({selector: <node label selector>, max: <count or "N%">}), at most C(max) of the nodes the
        selector matches, or C({topology_key: <label key>, max: <count or "N%">}), at most C(max)
        nodes of each value of the label (one node per C(topology.kubernetes.io/zone), say); a node
        without the label is under no domain of it.
      - A node takes a place in every budget it falls under, in one order for every run, all or
        nothing (a Lease C(<slot_prefix>-<slug>-<hash>-<i>) a domain, annotated
        C(nmo.maintenance/budget) with the budget and its domain). The most restrictive wins. A
        percentage is of the nodes of the domain, rounded up. A node of the domain already
        NotReady, or in maintenance without a place of the domain (another run without this
        budget, Node Health Check's lease), counts against it, as Karpenter counts it.
      - While a budget holds the node, C(lastError), the C(BlockedByNodeHealthCheck) event and
        M(nmo.maintenance.nmo_lease)'s C(holders) name the budget, its domain and who holds its places (node, lease, run).
      - C(max) is a whole number from 1 to 1000 or a percentage from C(1%) to C(100%); the
        selector must parse and the key be a label key; any other key is refused, before anything
        is written.
      - The nodes are listed (once per call, paginated, and every 10 s while waiting) only when
        the node falls under a budget of this list; without budgets nothing more is read.
    type: list
    elements: dict
    default: []
  control_plane_concurrency:
    description:
      - How many control-plane nodes (label C(node-role.kubernetes.io/control-plane) or
        C(node-role.kubernetes.io/master)) may be in maintenance at once, whatever O(concurrency),
        across every run; a built-in budget, with its places C(<slot_prefix>-control-plane-<i>).
        From 1 to 1000.
    type: int
    default: 1
  run_id:
    description:
      - The playbook run this is for (M(nmo.maintenance.nmo_run)). What is taken (the
        C(NodeMaintenance), the node lease, the slot) is annotated C(nmo.maintenance/run) with
        it. Something held for another run that is alive is never taken over, renewed or
        released; something held for a run that is gone is adopted (an event says so).
      - While waiting, the wait stops when this run is gone or the C(NodeMaintenance) is
        deleted, before anything is taken.
    type: str
  rollout:
    description:
      - The rollout that run O(run_id) is part of, as M(nmo.maintenance.nmo_run) returned it
        (RV(nmo.maintenance.nmo_run#module:rollout)). Read only in check mode, where the run's
        start wrote no run lease to say it; a real run's rollout is the one its run lease names.
      - With it, check mode tells what the run would do in a rollout of several runs, where a node
        of a rollout that another run stopped is V(stopped), as in the run.
    type: str
  turn:
    description:
      - With O(run_id), the node's position in its run's order, from 0 (the maintenance playbook
        passes it above concurrency 1). The C(NodeMaintenance) the begin makes or adopts is
        annotated C(nmo.maintenance/turn) with it.
      - A node that could take its places gives way while nodes of the same run earlier in the
        order wait for a place it would take, served first in their order; an earlier node that
        cannot go anyway (its own budget's domain is full, or it waits for something other than a
        place) takes nothing from it. Its C(lastError) then names them. Never in check mode or in
        operator mode; a node already holding its places or out of service never gives way.
      - Omitted, the node takes whatever place is free.
    type: int
"""
