#!/usr/bin/env bash
# The demo: start the local control plane, make a world of 3 control-plane nodes and 4
# workers with workloads behind PodDisruptionBudgets, maintain the workers one at a time,
# then show the diagnosis of every node (examples/demo_world.py down removes the world).
#
#   examples/demo.sh            maintain the workers
#   examples/demo.sh -e node_maintenance_concurrency=2    (any ansible-playbook option)
#   examples/demo.sh --kubevirt [...]   also the VM vm-order-processing of docs/design.md §12.3 on worker-02,
#                               alone behind minAvailable 1, live-migrated by the drain
#                               (node_maintenance_drain: {kubevirt: migrate}) with the stand-in for
#                               KubeVirt's controllers (hack/kubevirt/standin.py) running
#   examples/demo.sh --real-node [...]  instead, one real node (hack/real-node: a kubelet and a
#                               containerd on this machine; as root, the first time about a
#                               minute to build): a pod with a 5 s preStop hook and a DaemonSet on
#                               real-01, maintained with a power cycle of its kubelet as the work
#                               hook (examples/real-node-power-cycle.yml, inventory
#                               examples/real-node-inventory.yml); NotReady takes up to a minute
#   NMO_DEMO_INVENTORY=plugin examples/demo.sh   the hosts from the cluster: the inventory plugin
#                               nmo.maintenance.nodes with examples/nodes.nmo.yml, instead of
#                               examples/inventory.yml (ansible-inventory -i examples/nodes.nmo.yml --graph)
set -euo pipefail
kubevirt=()
real_node=
if [ "${1:-}" = --kubevirt ]; then
  shift
  kubevirt=(--kubevirt)
elif [ "${1:-}" = --real-node ]; then
  shift
  real_node=1
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bin=$(hack/venv)
export PATH="$bin:$PATH"
mkdir -p .cache/collections/ansible_collections/nmo
ln -sfn "$root" .cache/collections/ansible_collections/nmo/maintenance
export ANSIBLE_COLLECTIONS_PATH="$root/.cache/collections"
hack/cluster build
hack/cluster up
eval "$(hack/cluster env)"
export K8S_AUTH_KUBECONFIG="$KUBECONFIG"
real_node_demo() {  # the --real-node demo: one real node, its pods, a power cycle in the work hook
  NMO_CLUSTER_REAL_NODES=1 hack/cluster up
  local image ns=demo-real started
  image="nmo.test/busybox:$(kubectl get node real-01 -o 'jsonpath={.metadata.labels.nmo\.test/busybox-image}')"
  kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  # Real-node pods: host network, no service account token, the locally imported image.
  kubectl apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata: {name: graceful, namespace: $ns}
spec:
  nodeName: real-01
  hostNetwork: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 10
  containers:
  - name: main
    image: $image
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; sleep 3600 & wait"]
    lifecycle: {preStop: {exec: {command: [sleep, "5"]}}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: $ns}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec:
      nodeSelector: {nmo.test/real-node: "true"}
      tolerations: [{key: nmo.test/real-node, operator: Exists}]
      hostNetwork: true
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - {name: main, image: $image, imagePullPolicy: Never, command: [sleep, "3600"]}
EOF
  kubectl wait -n "$ns" pod --all --for=condition=Ready --timeout=120s >/dev/null
  echo "== real-01's pods, and what its containerd runs"
  kubectl get pods -n "$ns" -o wide
  ctr --address .cluster/real/real-01/containerd.sock --namespace k8s.io tasks ls
  started=$SECONDS
  ansible-playbook -i examples/real-node-inventory.yml playbooks/maintenance.yml "$@"
  echo "== the maintenance of real-01 took $((SECONDS - started)) s"
  echo "== what its containerd runs now (the DaemonSet's pod: the same container)"
  ctr --address .cluster/real/real-01/containerd.sock --namespace k8s.io tasks ls
  echo "== the story of real-01"
  kubectl get events -n default --field-selector involvedObject.name=maintenance-real-01 \
    --sort-by=.firstTimestamp -o custom-columns=TIME:.firstTimestamp,TYPE:.type,REASON:.reason,MESSAGE:.message
  echo "== the preStop pod's end, from the kubelet"
  kubectl get events -n "$ns" --field-selector involvedObject.name=graceful \
    -o custom-columns=TIME:.firstTimestamp,REASON:.reason,MESSAGE:.message
  kubectl delete namespace "$ns" --wait=false >/dev/null
}
if [ -n "$real_node" ]; then
  real_node_demo "$@"
  exit 0
fi
python examples/demo_world.py up "${kubevirt[@]}"
extra=()
if [ ${#kubevirt[@]} -gt 0 ]; then
  python hack/kubevirt/standin.py --kubeconfig "$KUBECONFIG" --namespace w-demo --step 1 > .cache/kubevirt-standin.log 2>&1 &
  standin=$!
  trap 'kill "$standin" 2>/dev/null || true' EXIT
  extra=(-e '{"node_maintenance_drain": {"kubevirt": "migrate"}}' -e node_maintenance_progress_interval=2)
fi
echo "== pods per node before"
kubectl get pods -n w-demo -o wide --no-headers | awk '{print $7}' | sort | uniq -c
started=$SECONDS
inventory=examples/inventory.yml
if [ "${NMO_DEMO_INVENTORY:-file}" = plugin ]; then
  inventory=examples/nodes.nmo.yml
  export ANSIBLE_PYTHON_INTERPRETER="$bin/python"  # what examples/inventory.yml sets for its hosts
  echo "== the hosts, from the cluster"
  ansible-inventory -i "$inventory" --graph
fi
report_dir="${NMO_DEMO_REPORT_DIR:-$root/nmo-reports/demo-$(date -u +%Y%m%d-%H%M%S)}"
ansible-playbook -i "$inventory" playbooks/maintenance.yml -l workers "${extra[@]}" \
  -e "node_maintenance_report_dir=$report_dir" "$@"
echo "== the maintenance playbook took $((SECONDS - started)) s"
echo "== pods per node after"
kubectl get pods -n w-demo -o wide --no-headers | awk '{print $7}' | sort | uniq -c
echo "== the story of node-demo-worker-02"
kubectl get events -n default --field-selector involvedObject.name=maintenance-demo-worker-02 \
  --sort-by=.firstTimestamp -o custom-columns=TIME:.firstTimestamp,TYPE:.type,REASON:.reason,MESSAGE:.message
if [ ${#kubevirt[@]} -gt 0 ]; then
  echo "== the VM's migrations"
  kubectl get vmim -n w-demo -o custom-columns=NAME:.metadata.name,VMI:.spec.vmiName,PHASE:.status.phase,FROM:.status.migrationState.sourceNode,TO:.status.migrationState.targetNode
fi
ansible-playbook playbooks/status.yml "${extra[@]}" -e nmo_all=true -e nmo_nodes=node-demo-worker-01,node-demo-worker-02
echo "== the run report (docs/report.md): $report_dir/report.html (and report.json, report.xml)"
