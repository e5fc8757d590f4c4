#!/usr/bin/env bash
# Builds what a real node of hack/cluster needs into the per-user cache: the kubelet (from
# the control plane's wrapper module, hack/build/k8s, so it is the same Kubernetes version),
# the sandboxes' pause program (hack/real-node.d/pause) and the two OCI images, written
# here because no registry is reachable: nmo.test/busybox:<Debian's busybox version> and
# nmo.test/pause:<PAUSE_IMAGE_TAG>. Called by hack/real-node; prints the cache folder
# on its last line (bin/kubelet, images/*.tar).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
# shellcheck source=real-node.d/versions.env
. "$here/real-node.d/versions.env"
export GOTOOLCHAIN="$GO_TOOLCHAIN" GOFLAGS=-mod=mod
busybox=/bin/busybox  # busybox-static's: a static binary is the whole image
[ "$(dpkg-query -W -f '${Status}' busybox-static 2>/dev/null)" = "install ok installed" ] \
  || { echo "hack/build-real-node.sh: $busybox is not Debian's busybox-static (apt-get install busybox-static)" >&2; exit 1; }
# (sed reads the whole help: a reader that stops early would end busybox with SIGPIPE,
# and this script with it, under pipefail)
busybox_version=$("$busybox" 2>&1 | sed -n '1s/^BusyBox v\([0-9.]*\).*/\1/p')
key=$( (cat "$here/versions.env" "$here/real-node.d/versions.env" "$here/build-real-node.sh" "$here"/build/k8s/go.mod "$here"/build/k8s/go.sum \
  "$here"/real-node.d/pause/*; echo "$busybox_version") | sha256sum | cut -c1-12)
cache_root=${NMO_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmo-maintenance/cluster}
out="$cache_root/real-node-$KUBERNETES_VERSION-$key"
have_all() { [ -x "$out/bin/kubelet" ] && [ -f "$out/images/busybox.tar" ] && [ -f "$out/images/pause.tar" ]; }
if ! have_all; then
  # hack/test builds it in the background while other tests run: a second build waits for it.
  mkdir -p "$cache_root"
  exec 9> "$out.lock"
  flock 9
fi
if have_all; then
  echo "real node cached in $out" >&2
  echo "$out"
  exit 0
fi
start=$(date +%s)
rm -rf "$out.partial"
mkdir -p "$out.partial/bin" "$out.partial/images"
minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
# A copy of the wrapper module: -mod=mod may add go.sum lines for the kubelet's packages,
# and the tracked go.sum (the control plane's cache key) must stay as it is.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/build/k8s/go.mod" "$here/build/k8s/go.sum" "$work/"
echo "building kubelet $KUBERNETES_VERSION" >&2
(cd "$work" && go build -trimpath -ldflags "-s -w $kver" -o "$out.partial/bin/kubelet" k8s.io/kubernetes/cmd/kubelet)
echo "building pause" >&2
(cd "$here/real-node.d/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.partial/bin/pause" .)

# image <name> <file> <rootfs folder> <Cmd as a JSON list>: one OCI layout (one layer),
# archived as `ctr images import` reads it.
image() {
  local name=$1 file=$2 rootfs=$3 cmd=$4 layout="$work/layout-$2"
  mkdir -p "$layout/blobs/sha256"
  blob() {  # blob <file>: moves it into the layout, prints "<digest> <size>"
    local digest size
    digest=$(sha256sum "$1" | cut -d' ' -f1); size=$(stat -c %s "$1")
    mv "$1" "$layout/blobs/sha256/$digest"
    echo "$digest $size"
  }
  tar --numeric-owner --owner 0 --group 0 --mtime @0 --sort name -C "$rootfs" -cf "$work/layer.tar" .
  local layer config manifest
  read -r -a layer <<< "$(blob "$work/layer.tar")"
  printf '{"architecture":"amd64","os":"linux","config":{"Cmd":%s,"Env":["PATH=/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$cmd" "${layer[0]}" > "$work/config.json"
  read -r -a config <<< "$(blob "$work/config.json")"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "${config[0]}" "${config[1]}" "${layer[0]}" "${layer[1]}" > "$work/manifest.json"
  read -r -a manifest <<< "$(blob "$work/manifest.json")"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"},"platform":{"architecture":"amd64","os":"linux"}}]}' \
    "${manifest[0]}" "${manifest[1]}" "$name" "${name##*:}" > "$layout/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  tar --numeric-owner --owner 0 --group 0 --mtime @0 --sort name -C "$layout" -cf "$out.partial/images/$file.tar" .
  echo "$name" > "$out.partial/images/$file.name"
}

echo "writing the images nmo.test/busybox:$busybox_version and nmo.test/$PAUSE_IMAGE" >&2
rootfs="$work/busybox-root"
mkdir -p "$rootfs/bin" "$rootfs/tmp" "$rootfs/etc"
cp "$busybox" "$rootfs/bin/busybox"
for applet in $("$busybox" --list); do [ "$applet" = busybox ] || ln -s busybox "$rootfs/bin/$applet"; done
echo 'root:x:0:0:root:/:/bin/sh' > "$rootfs/etc/passwd"
image "nmo.test/busybox:$busybox_version" busybox "$rootfs" '["sh"]'
rootfs="$work/pause-root"
mkdir -p "$rootfs"
cp "$out.partial/bin/pause" "$rootfs/pause"
image "nmo.test/$PAUSE_IMAGE" pause "$rootfs" '["/pause"]'

rm -rf "$out"
mv "$out.partial" "$out"
echo "built kubelet, pause and the images in $(( $(date +%s) - start )) s into $out" >&2
echo "$out"
