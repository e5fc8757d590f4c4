#!/usr/bin/env bash
# Builds the medik8s code the tests run against, from the Go module proxy, into the per-user
# cache; called by `hack/medik8s build`; prints the cache folder on its last line:
#   bin/nmo         the Node Maintenance Operator $NMO_VERSION (module root main package)
#   bin/leasetool   our program over github.com/medik8s/common $MEDIK8S_COMMON_VERSION pkg/lease
#   manifests/      NMO's CRD and RBAC, extracted from its module (nothing of NMO is copied
#                   into this repository; the module is the source)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
hack=$(dirname "$here")
# shellcheck source=../versions.env
. "$hack/versions.env"
# shellcheck source=versions.env
. "$here/versions.env"
export GOTOOLCHAIN="$GO_TOOLCHAIN" GOFLAGS="-mod=mod ${NMO_MEDIK8S_GOFLAGS:-}"
# The checksum database does not know the medik8s modules; go.sum pins them.
export GONOSUMDB="github.com/medik8s${GONOSUMDB:+,$GONOSUMDB}"
key=$( (grep '^GO_TOOLCHAIN=' "$hack/versions.env"; cat "$here/versions.env" "$here/build.sh" \
  "$here/nmo/go.mod" "$here/nmo/go.sum" "$here/leasetool/go.mod" "$here/leasetool/go.sum" \
  "$here/leasetool/main.go") | sha256sum | cut -c1-12)
cache_root=${NMO_MEDIK8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmo-maintenance/medik8s}
out="$cache_root/$NMO_VERSION-$key"
files=(bin/nmo bin/leasetool manifests/crd.yaml manifests/role.yaml manifests/leader-election-role.yaml)

have_all() { for f in "${files[@]}"; do [ -s "$out/$f" ] || return 1; done; }
if have_all; then
  echo "medik8s binaries cached in $out" >&2
  echo "$out"
  exit 0
fi
start=$(date +%s)
rm -rf "$out.partial"
mkdir -p "$out.partial/bin" "$out.partial/manifests"
(
  cd "$here/nmo"
  echo "building node-maintenance-operator $NMO_VERSION" >&2
  go build -trimpath -ldflags "-s -w \
    -X github.com/medik8s/node-maintenance-operator/version.Version=$NMO_VERSION \
    -X github.com/medik8s/node-maintenance-operator/version.BuildDate=1970-01-01T00:00:00Z" \
    -o "$out.partial/bin/nmo" github.com/medik8s/node-maintenance-operator
  src=$(go list -m -f '{{.Dir}}' github.com/medik8s/node-maintenance-operator)
  cp "$src/config/crd/bases/nodemaintenance.medik8s.io_nodemaintenances.yaml" "$out.partial/manifests/crd.yaml"
  cp "$src/config/rbac/role.yaml" "$out.partial/manifests/role.yaml"
  cp "$src/config/rbac/leader_election_role.yaml" "$out.partial/manifests/leader-election-role.yaml"
  chmod u+w "$out.partial"/manifests/*
)
(
  cd "$here/leasetool"
  echo "building leasetool (medik8s/common $MEDIK8S_COMMON_VERSION)" >&2
  go build -trimpath -ldflags "-s -w" -o "$out.partial/bin/leasetool" .
)
rm -rf "$out"
mv "$out.partial" "$out"
echo "built nmo $NMO_VERSION and leasetool in $(( $(date +%s) - start )) s into $out" >&2
echo "$out"
