#!/usr/bin/env bash
# Builds the Go binaries of the kind node image from the Go module proxy, one at a time, into
# $1 (a cache directory outside the clone). Called by hack/kind-cluster; skips a binary that
# is already there (the caller clears the directory when the stamp changes).
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=v1.32.13
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=32 \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=32"
build() { # name package [ldflags]
    local name=$1 pkg=$2 flags=${3:-$k8s_ldflags}
    [[ -x $out/$name ]] && return 0
    local t0=$SECONDS
    (cd "$here" && go build -ldflags "$flags" -o "$out/.$name.tmp" "$pkg")
    mv "$out/.$name.tmp" "$out/$name"
    echo "built $name in $((SECONDS - t0)) s"
}
for cmd in kubelet kubeadm kube-proxy kube-scheduler kube-apiserver kube-controller-manager kubectl; do
    build "$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
build etcd ./cmd/etcd "-s -w"
build pause ./cmd/pause "-s -w"
# CoreDNS at the version kubeadm v1.32 deploys (its go.mod has no replace, so go install works).
if [[ ! -x $out/coredns ]]; then
    t0=$SECONDS
    (cd "$here" && GOFLAGS="-trimpath -buildvcs=false" GOBIN="$out/.gobin" \
        go install -ldflags "-s -w" github.com/coredns/coredns@v1.11.3)
    mv "$out/.gobin/coredns" "$out/coredns" && rmdir "$out/.gobin"
    echo "built coredns in $((SECONDS - t0)) s"
fi
