#!/usr/bin/env bash
# The container engine and the base image that kpo's images are built from, idempotently.
#
#   tools/containers.sh engine   podman, buildah, runc and mmdebstrap from Debian (apt, when
#                                missing); runc as OCI runtime and container limits no higher
#                                than this machine's, in /etc/containers/containers.conf.d/
#   tools/containers.sh base     print the base image to build from (BASE_IMAGE build arg):
#                                $KPO_BASE_IMAGE if set; else a Debian bookworm root filesystem
#                                with Python made with mmdebstrap, cached as a tar under
#                                $KPO_TOOLS_DIR/images/ (default ~/.cache/kpo-tools/images) and
#                                `podman import`ed once (no container registry is needed)
#   tools/containers.sh engine-cmd  print the engine `make image` uses: docker when its daemon
#                                answers (`docker info`), else podman
#
# Why each setting (this project's machines, Debian 12 kernel with a hybrid cgroup layout):
# crun refuses the cgroup layout, runc works; a container may not raise `nofile`/`nproc` above
# the machine's hard limits, so the defaults are set to them. The base tar is keyed by its
# package list and rebuilt when older than KPO_BASE_MAX_AGE_DAYS (default 30) so that Debian's
# security updates come in; a warm run only imports (or finds) the cached tar.
set -euo pipefail
TOOLS_DIR="${KPO_TOOLS_DIR:-$HOME/.cache/kpo-tools}"
IMAGES="$TOOLS_DIR/images"
SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python-is-python3,ca-certificates
MAX_AGE_DAYS="${KPO_BASE_MAX_AGE_DAYS:-30}"

log() { printf '[containers %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
sudo_if_needed() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }

install_engine() {
  local missing=() cmd
  for cmd in podman:podman buildah:buildah runc:runc mmdebstrap:mmdebstrap; do
    command -v "${cmd%%:*}" >/dev/null || missing+=("${cmd##*:}")
  done
  if ((${#missing[@]})); then
    log "apt-get install ${missing[*]}"
    sudo_if_needed apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get -o DPkg::Lock::Timeout=600 \
      install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  local nofile nproc conf=/etc/containers/containers.conf.d/50-kpo.conf want
  nofile="$(ulimit -Hn)"; nproc="$(ulimit -Hu)"
  [[ $nofile == unlimited || $nofile -gt 1048576 ]] && nofile=1048576
  [[ $nproc == unlimited || $nproc -gt 4096 ]] && nproc=4096
  want="# Written by kpo's tools/containers.sh: runc (crun refuses this kernel's cgroup layout)
# and container limits no higher than the machine's hard limits.
[containers]
default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]

[engine]
runtime = \"runc\""
  if [[ ! -f $conf || "$(cat "$conf")" != "$want" ]]; then
    log "writing $conf (runtime runc, nofile=$nofile, nproc=$nproc)"
    sudo_if_needed mkdir -p "$(dirname "$conf")"
    printf '%s\n' "$want" | sudo_if_needed tee "$conf" >/dev/null
  fi
}

base_image() {
  if [[ -n "${KPO_BASE_IMAGE:-}" ]]; then echo "$KPO_BASE_IMAGE"; return; fi
  local key tag tar
  key="$(printf '%s %s %s %s' "$SUITE" minbase "$BASE_PACKAGES" merged-usr-slim | sha256sum | cut -c1-12)"
  tag="localhost/kpo-base:$SUITE-python-$key"
  mkdir -p "$IMAGES"
  tar="$(ls -t "$IMAGES"/debian-"$SUITE"-python-"$key"-*.tar 2>/dev/null | head -1 || true)"
  if [[ -n $tar ]] && [[ -n "$(find "$tar" -mtime +"$MAX_AGE_DAYS")" ]]; then
    log "base image $tar is older than $MAX_AGE_DAYS days: rebuilding"
    rm -f "$tar"; tar=""
    podman rmi -f "$tag" >/dev/null 2>&1 || true
  fi
  if [[ -z $tar ]]; then
    tar="$IMAGES/debian-$SUITE-python-$key-$(date -u +%Y%m%d).tar"
    log "mmdebstrap $SUITE minbase + $BASE_PACKAGES -> $tar"
    # merged-/usr by mmdebstrap's hook (the usrmerge package would bring Perl, ~45 MB);
    # no manuals, documentation or translations (as Debian's slim images do).
    mmdebstrap --quiet --format=tar --variant=minbase --include="$BASE_PACKAGES" \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --customize-hook='rm -rf "$1"/var/cache/apt/*.bin "$1"/var/lib/apt/lists/* "$1"/var/log/*.log' \
      "$SUITE" "$tar.tmp" >&2
    mv "$tar.tmp" "$tar"
    podman rmi -f "$tag" >/dev/null 2>&1 || true
  fi
  # The tag names the package list; the label names the tar it came from.
  local from
  from="$(podman image inspect --format '{{index .Config.Labels "dev.kpo.base.tar"}}' "$tag" 2>/dev/null || true)"
  if [[ "$from" != "$(basename "$tar")" ]]; then
    log "podman import $tar as $tag"
    podman import --change "LABEL dev.kpo.base.tar=$(basename "$tar")" \
      --change 'CMD ["python3"]' "$tar" "$tag" >/dev/null
  fi
  echo "$tag"
}

engine_cmd() {
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
  if command -v podman >/dev/null; then echo podman; return; fi
  echo "no container engine: a docker daemon does not answer and podman is missing" \
    "(bash tools/containers.sh engine installs podman)" >&2
  return 2
}

case "${1:-}" in
  engine) install_engine ;;
  base) base_image ;;
  engine-cmd) engine_cmd ;;
  *) echo "usage: $0 engine|base|engine-cmd" >&2; exit 2 ;;
esac
