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
"""
