#!/usr/bin/env bash
# Builds the control-plane binaries from the Go module proxy into the per-user cache.
# Called by `hack/cluster build`; prints the cache folder on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
export GOTOOLCHAIN="$GO_TOOLCHAIN" GOFLAGS=-mod=mod
key=$(cat "$here/versions.env" "$here/build.sh" "$here"/build/*/go.mod "$here"/build/*/go.sum | sha256sum | cut -c1-12)
cache_root=${NMO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmo-maintenance/cluster}
bin="$cache_root/$KUBERNETES_VERSION-$key/bin"
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

have_all() { for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done; }
if have_all; then
  echo "binaries cached in $bin" >&2
  echo "$bin"
  exit 0
fi
start=$(date +%s)
mkdir -p "$bin.partial"
minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z \
 -X k8s.io/client-go/pkg/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
(
  cd "$here/build/k8s"
  # One go build for the four: their packages compile in one graph and they link side by side,
  # where one build after another leaves a core idle through each link (a cold machine's
  # minutes are mostly this build, on the way to every test).
  k8s=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  echo "building ${k8s[*]} $KUBERNETES_VERSION" >&2
  go build -trimpath -ldflags "-s -w $kver" -o "$bin.partial/" "${k8s[@]/#/k8s.io/kubernetes/cmd/}"
  echo "building etcd $ETCD_VERSION" >&2
  go build -trimpath -ldflags "-s -w" -o "$bin.partial/etcd" go.etcd.io/etcd/server/v3
)
(
  cd "$here/build/kwok"
  echo "building kwok $KWOK_VERSION" >&2
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" \
    -o "$bin.partial/kwok" sigs.k8s.io/kwok/cmd/kwok
  # kwok's stage definitions ship in its module; copy the ones the cluster uses.
  src=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  mkdir -p "$bin.partial/../stages"
  cp -r "$src/kustomize/stage/." "$bin.partial/../stages/"
  chmod -R u+w "$bin.partial/../stages"
)
rm -rf "$bin"
mv "$bin.partial" "$bin"
echo "built ${binaries[*]} in $(( $(date +%s) - start )) s into $bin" >&2
echo "$bin"
