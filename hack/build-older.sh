#!/usr/bin/env bash
# Builds the control plane at an older supported Kubernetes minor into the per-user cache,
# beside the current build:  hack/build-older.sh 1.31
# Called by hack/cluster when NMO_CLUSTER_VERSION names that minor; prints the cache
# folder on its last line. Pins: hack/build-<minor>/versions.env and
# hack/build-<minor>/k8s/go.mod, go.sum.
#
# Only kube-apiserver, kube-controller-manager and kube-scheduler are built at that
# version; etcd, kwok and kubectl come from the current build (hack/build.sh, built first
# when missing), so a cold machine spends its minutes on the three that must differ.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
minor=${1:?usage: hack/build-older.sh <minor, e.g. 1.31>}
pins="$here/build-$minor"
[ -f "$pins/versions.env" ] || { echo "hack/build-older.sh: no pins for Kubernetes $minor ($pins/versions.env)" >&2; exit 1; }
# The current build first: its etcd, kwok and kubectl are reused, and its folder name is
# part of this build's key (a new etcd or kwok makes a new older build too).
current=$("$here/build.sh" | tail -n 1)
# shellcheck source=build-1.31/versions.env
. "$pins/versions.env"
export GOTOOLCHAIN="$GO_TOOLCHAIN" GOFLAGS=-mod=mod
key=$( { cat "$pins/versions.env" "$here/build-older.sh" "$pins"/k8s/go.mod "$pins"/k8s/go.sum; echo "$current"; } \
  | sha256sum | cut -c1-12)
cache_root=${NMO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmo-maintenance/cluster}
bin="$cache_root/$KUBERNETES_VERSION-$key/bin"
built=(kube-apiserver kube-controller-manager kube-scheduler)
reused=(kubectl etcd kwok)

have_all() { for b in "${built[@]}" "${reused[@]}"; do [ -x "$bin/$b" ] || return 1; done; }
if have_all; then
  echo "binaries cached in $bin" >&2
  echo "$bin"
  exit 0
fi
start=$(date +%s)
rm -rf "$bin.partial"
mkdir -p "$bin.partial"
v_minor=${KUBERNETES_VERSION#v1.}; v_minor=${v_minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$v_minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$v_minor"
(
  cd "$pins/k8s"
  # one go build for the three (hack/build.sh says why)
  echo "building ${built[*]} $KUBERNETES_VERSION" >&2
  go build -trimpath -ldflags "-s -w $kver" -o "$bin.partial/" "${built[@]/#/k8s.io/kubernetes/cmd/}"
)
# Hard links where the caches share a file system (no copy of ~150 MB), a copy otherwise.
for b in "${reused[@]}"; do ln -f "$current/$b" "$bin.partial/$b" 2>/dev/null || cp "$current/$b" "$bin.partial/$b"; done
rm -rf "$bin.partial/../stages"
cp -r "$current/../stages" "$bin.partial/../stages"
rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "built ${built[*]} $KUBERNETES_VERSION in $(( $(date +%s) - start )) s into $bin (${reused[*]} from $current)" >&2
echo "$bin"
