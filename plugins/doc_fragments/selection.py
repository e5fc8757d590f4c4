# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Which pods a drain takes and how: the options nmo_drain and nmo_preflight share
# (module_utils/specs.py, SELECTION; defaults from DrainOptions).


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
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
      - V(wait), as for any pod, retries the eviction until someone moves the VM (docs/design.md §12.3,
        a C(VirtualMachineInstanceMigration) made by hand) or the O(nmo.maintenance.nmo_drain#module:timeout).
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
        O(nmo.maintenance.nmo_drain#module:retry_delay) s, and O(nmo.maintenance.nmo_drain#module:timeout)
        still ends the drain. A virt-launcher pod is never deleted by the drain.
      - Events C(MigrationStarted), C(MigrationSucceeded) and C(MigrationFailed) on the NodeMaintenance, and the
        status field C(migrations), and the progress line says, for instance,
        C(vm-order-processing - migrating, phase TargetReady, 40 s). Needs the C(kubevirt.io) rules of the shipped ClusterRole.
      - With V(wait), or no virt-launcher pod refused, the drain makes no request about KubeVirt. With
        M(nmo.maintenance.nmo_drain)'s O(nmo.maintenance.nmo_drain#module:operator=true) NMO drains and this option has no effect.
      - M(nmo.maintenance.nmo_preflight) with V(migrate) judges a refused VM pod by its VMI, C(go (migrate)) when
        it would be migrated, C(blocked) with the VMI's reason when not.
    type: str
    choices: [wait, migrate]
    default: wait
"""
