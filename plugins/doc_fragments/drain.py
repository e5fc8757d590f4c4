# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain options of nmo_drain and nmo_preflight, documented once (declared in
module_utils/model/drain_spec.py, DRAIN: the selection, then timing, retry and fallback).

They are written once, as the sub-options of ``drain``; the same options at the top level
(specs.FLAT_DRAIN, the form from before ``drain``) are written from them below by
hack/role_docs.py (a literal: ansible-test reads a fragment without importing it), and
tests/unit/test_specs.py fails when that part is out of date.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  drain:
    description:
      - How the node is drained, one dict for every drain option (the role passes its
        C(node_maintenance_drain) here whole). Each key has its default when left out.
      - When given, the same options at the top level (below, the form from before this option)
        are ignored, each one set with a warning that says so.
      - M(nmo.maintenance.nmo_preflight) judges with the selection (O(drain.force) to O(drain.kubevirt))
        and takes the drain's timing and fallback keys without using them, so that one dict serves both.
    type: dict
    suboptions:
      force:
        description:
          - Evict pods that no controller manages (they are not recreated anywhere).
          - When false, such a pod is refused, naming this option; M(nmo.maintenance.nmo_drain) fails
            before anything is evicted, M(nmo.maintenance.nmo_preflight) reports the node blocked.
        type: bool
        default: true
      delete_emptydir_data:
        description:
          - Evict pods with C(emptyDir) volumes (their data is lost). When false, such a pod is refused.
        type: bool
        default: true
      ignore_daemonsets:
        description:
          - Skip DaemonSet pods. When false, a DaemonSet pod on the node is refused.
        type: bool
        default: true
      pod_selector:
        description: Only pods whose labels match this label selector (C(app=web,tier!=db)) are drained.
        type: str
      disable_eviction:
        description: Delete the pods instead of evicting them. PodDisruptionBudgets are not consulted.
        type: bool
        default: false
      skip_wait_for_delete_timeout:
        description: Pods terminating for longer than this many seconds are not waited for. 0 waits for all.
        type: int
        default: 0
      surge:
        description:
          - Surge-first. A pod its PodDisruptionBudget refuses, of a Deployment whose RollingUpdate has an effective
            maxSurge of at least 1 and maxUnavailable 0, gets its Deployment restarted once (the pod template's
            C(kubectl.kubernetes.io/restartedAt), as C(kubectl rollout restart)); its new pod is made elsewhere before
            the old one goes, so the budget is never broken. Never for a Recreate Deployment, a StatefulSet, a bare pod
            or a Deployment being rolled out already, and the reason is said. M(nmo.maintenance.nmo_preflight) says per
            refused pod whether surge would free it.
        type: bool
        default: false
      parallelism:
        description:
          - At most this many eviction requests at a time (dry-run ones for M(nmo.maintenance.nmo_preflight)),
            1 to 500.
        type: int
        default: 32
      kubevirt:
        description:
          - What a drain does about a KubeVirt VM whose virt-launcher pod (label C(kubevirt.io=virt-launcher),
            owned by a C(kubevirt.io/v1) C(VirtualMachineInstance)) a PodDisruptionBudget refuses to evict.
          - V(wait), as for any pod, retries the eviction until someone moves the VM (a
            C(VirtualMachineInstanceMigration) made by hand) or the O(nmo.maintenance.nmo_drain#module:drain.timeout).
          - V(migrate) live-migrates it. When the VMI reports C(LiveMigratable=True), one
            C(VirtualMachineInstanceMigration) is created for it and followed by watch to C(Succeeded);
            KubeVirt then ends the pod on the node, and the drain sees it go. At most 2 migrations of a drain run at
            once (KubeVirt's default C(parallelOutboundMigrationsPerNode)), and none is started while the cluster has 5
            unfinished (C(parallelMigrationsPerCluster)), counted from a watch of every migration. A migration
            already under way for the VMI is followed, not doubled; a VMI whose C(evictionStrategy) is
            C(LiveMigrate) or C(LiveMigrateIfPossible) is left to KubeVirt, which migrates it on eviction.
          - A VMI that is not live-migratable, or a migration that fails, leaves the pod pending with
            KubeVirt's reason in C(lastError) and one event (C(DrainError), C(MigrationFailed)). The retry
            policy is one migration per VM and drain, none retried by the drain itself; a VMI that becomes
            C(LiveMigratable) during the drain is migrated then; the pod's eviction keeps being retried every
            O(nmo.maintenance.nmo_drain#module:drain.retry_delay) s, and O(nmo.maintenance.nmo_drain#module:drain.timeout)
            still ends the drain. A virt-launcher pod is never deleted by the drain.
          - Events C(MigrationStarted), C(MigrationSucceeded) and C(MigrationFailed) on the NodeMaintenance, and the
            status field C(migrations), and the progress line says, for instance,
            C(vm-order-processing - migrating, phase TargetReady, 40 s).
            Needs the C(kubevirt.io) rules of the shipped ClusterRole.
          - With V(wait), or no virt-launcher pod refused, the drain makes no request about KubeVirt. With
            M(nmo.maintenance.nmo_drain)'s O(nmo.maintenance.nmo_drain#module:operator=true)
            NMO drains and this option has no effect.
          - M(nmo.maintenance.nmo_preflight) with V(migrate) judges a refused VM pod by its VMI, C(go (migrate)) when
            it would be migrated, C(blocked) with the VMI's reason when not.
        type: str
        choices: [wait, migrate]
        default: wait
      rules:
        description:
          - Drain rules, as Cluster API's C(MachineDrainRule) has them (see C(docs/drain-rules.md)). Each rule
            matches pods by its C(selector) and/or C(namespace_selector) and says what the drain does with them.
            The first rule that matches a pod wins; a pod no rule matches is drained in order V(0).
          - A pod's label C(nmo.maintenance/drain) (or Cluster API's C(cluster.x-k8s.io/drain)) overrides the
            rules, with the value V(skip), V(wait-completed), V(drain) or C(order-<n>) (drained in order n, C(order--5)
            for a negative one, since a label value holds no C(=)); an annotation of the same key may say the same, or
            C(order=<n>), and is read when the pod has no such label. Any
            other value refuses that pod, named (M(nmo.maintenance.nmo_drain) fails before anything is evicted,
            M(nmo.maintenance.nmo_preflight) says V(no-go) for its node).
          - The pods to evict are taken in order batches, lowest order first; each batch is evicted in parallel
            as without rules, and every pod of it (by UID) is gone before the next batch's first eviction. The
            NodeMaintenance status C(drainBatch), the progress line and C(playbooks/status.yml) name the batch
            being drained, for example C(batch 2 of 3 (order 10)) and its pods counted. Skipped pods stay,
            listed in C(skipped_pods) with the rule in their reason and in the status C(skippedPods). Pods to
            wait for are not evicted; the drain waits until they finish (C(Succeeded) or C(Failed)) or are gone, within
            O(nmo.maintenance.nmo_drain#module:drain.timeout), whose message names them.
          - Whatever the rules say, a pod annotated C(karpenter.sh/do-not-disrupt=true) or
            C(nmo.maintenance/do-not-disrupt=true) is never evicted nor deleted (not by
            O(nmo.maintenance.nmo_drain#module:drain.delete_fallback_after) nor
            O(nmo.maintenance.nmo_drain#module:drain.disable_eviction) either). It blocks its batch as a
            PodDisruptionBudget that allows nothing would, named as such in C(lastError), the progress line and
            the timeout's message, until the annotation is removed; the pre-flight says V(no-go) for its node.
          - Unset or empty, the drain is what it was without rules, with no extra request. A rule with a
            C(namespace_selector) costs one read of each namespace with pods on the node.
          - With M(nmo.maintenance.nmo_drain)'s O(nmo.maintenance.nmo_drain#module:operator=true) NMO drains
            and the rules have no effect (a warning says so).
        type: list
        elements: dict
        suboptions:
          name:
            description: A name for the rule, used in messages and reasons (C(rule 2 (storage-last))).
            type: str
          selector:
            description:
              - A label selector over the pod's labels (C(app=web,tier!=db), C(env in (a,b)), C(!legacy)), as
                O(nmo.maintenance.nmo_drain#module:drain.pod_selector) takes it. Unset, any pod.
            type: str
          namespace_selector:
            description:
              - A label selector over the labels of the pod's namespace (C(kubernetes.io/metadata.name=rook-ceph)
                selects one by name). Unset, any namespace. With both selectors, a pod must match both.
            type: str
          action:
            description:
              - V(drain), evicted in the batch of its C(order);
                V(skip), left on the node; V(wait-completed), not evicted, waited for until it finishes.
            type: str
            choices: [drain, skip, wait-completed]
            default: drain
          order:
            description:
              - The order batch of the pods of a V(drain) rule, lowest first (negative drains before the
                unmatched pods, which are V(0)). Only V(drain) rules take one.
            type: int
            default: 0
      grace_period:
        description:
          - Termination grace period in seconds for every pod. Unset, each pod's own is used.
          - M(nmo.maintenance.nmo_preflight) takes it and does not use it (it evicts nothing).
        type: int
      timeout:
        description:
          - Seconds the drain may take in all, waiting included (more than 0, at most 604800). When it
            runs out, M(nmo.maintenance.nmo_drain) fails with the pending pods named.
          - The role C(nmo.maintenance.node_maintenance) gives a whole node 1800 s, on purpose (VMs
            live-migrating, budgets letting one pod go at a time).
        type: float
        default: 600
      delete_fallback_after:
        description:
          - After a pod's eviction has been refused by its PodDisruptionBudget for this many seconds, delete it
            instead (kubespray's drain fallback). Unset, a PodDisruptionBudget is never bypassed.
        type: float
      retry_delay:
        description: Seconds between two evictions of a pod that a PodDisruptionBudget refused, 0.1 to 3600.
        type: float
        default: 1
      returning_pod_evictions:
        description:
          - A pod that lands on the node after the drain began (a replacement that the scheduler put back, because
            its tolerations admit the maintenance taints, as a toleration with C(operator) V(Exists) and no C(key)
            does) and that the drain would take (not a DaemonSet or mirror pod) is evicted again, at most this many
            times per workload (its controller), 0 to 100. One more, and the drain fails naming those pods and the
            toleration that let each in. The drain never ends with such a pod on the node. Before it says it is
            done while replacements may come back, it lists the node's pods once more.
        type: int
        default: 3
  # generated by hack/role_docs.py from the modules' drain option: run it after a change there
  force:
    description:
      - The same as O(drain.force), for tasks written before O(drain); ignored when O(drain) is given.
    type: bool
  delete_emptydir_data:
    description:
      - The same as O(drain.delete_emptydir_data), for tasks written before O(drain); ignored when O(drain)
        is given.
    type: bool
  ignore_daemonsets:
    description:
      - The same as O(drain.ignore_daemonsets), for tasks written before O(drain); ignored when O(drain)
        is given.
    type: bool
  pod_selector:
    description:
      - The same as O(drain.pod_selector), for tasks written before O(drain); ignored when O(drain) is given.
    type: str
  disable_eviction:
    description:
      - The same as O(drain.disable_eviction), for tasks written before O(drain); ignored when O(drain)
        is given.
    type: bool
  skip_wait_for_delete_timeout:
    description:
      - The same as O(drain.skip_wait_for_delete_timeout), for tasks written before O(drain); ignored when
        O(drain) is given.
    type: int
  parallelism:
    description:
      - The same as O(drain.parallelism), for tasks written before O(drain); ignored when O(drain) is given.
    type: int
  kubevirt:
    description:
      - The same as O(drain.kubevirt), for tasks written before O(drain); ignored when O(drain) is given.
    type: str
    choices:
      - wait
      - migrate
  surge:
    description:
      - The same as O(drain.surge), for tasks written before O(drain); ignored when O(drain) is given.
    type: bool
  rules:
    description:
      - The same as O(drain.rules), for tasks written before O(drain); ignored when O(drain) is given.
    type: list
    elements: dict
    suboptions:
      name:
        description: A name for the rule, used in messages and reasons (C(rule 2 (storage-last))).
        type: str
      selector:
        description:
          - A label selector over the pod's labels (C(app=web,tier!=db), C(env in (a,b)), C(!legacy)), as
            O(nmo.maintenance.nmo_drain#module:drain.pod_selector) takes it. Unset, any pod.
        type: str
      namespace_selector:
        description:
          - A label selector over the labels of the pod's namespace (C(kubernetes.io/metadata.name=rook-ceph)
            selects one by name). Unset, any namespace. With both selectors, a pod must match both.
        type: str
      action:
        description:
          - V(drain), evicted in the batch of its C(order); V(skip), left on the node; V(wait-completed),
            not evicted, waited for until it finishes.
        type: str
        choices:
          - drain
          - skip
          - wait-completed
        default: drain
      order:
        description:
          - The order batch of the pods of a V(drain) rule, lowest first (negative drains before the unmatched
            pods, which are V(0)). Only V(drain) rules take one.
        type: int
        default: 0
  grace_period:
    description:
      - The same as O(drain.grace_period), for tasks written before O(drain); ignored when O(drain) is given.
    type: int
  timeout:
    description:
      - The same as O(drain.timeout), for tasks written before O(drain); ignored when O(drain) is given.
    type: float
  delete_fallback_after:
    description:
      - The same as O(drain.delete_fallback_after), for tasks written before O(drain); ignored when O(drain)
        is given.
    type: float
  retry_delay:
    description:
      - The same as O(drain.retry_delay), for tasks written before O(drain); ignored when O(drain) is given.
    type: float
  returning_pod_evictions:
    description:
      - The same as O(drain.returning_pod_evictions), for tasks written before O(drain); ignored when O(drain)
        is given.
    type: int
  # end of what hack/role_docs.py writes
"""
