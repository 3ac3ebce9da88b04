#!/usr/bin/env bash
# Build kpo's images from broker-image/Dockerfile (`make image`; the container tests call it
# too, so that they always run the current code: with the layer cache warm that takes seconds).
#
#   tools/build-images.sh [kpo] [placement] [zookeeper]     (default: kpo placement)
#
# Names: $IMAGE (kpo), $PLACEMENT_IMAGE, $ZOOKEEPER_IMAGE. Engine: $ENGINE, else docker when
# its daemon answers, else podman (installed with apt by tools/containers.sh when missing,
# with runc and the machine's limits). Base: $BASE_IMAGE; when empty with podman, the Debian
# bookworm image that tools/containers.sh makes with mmdebstrap (no registry needed); when
# empty with docker, the Dockerfile's default (python:3.11.11-slim-bookworm; pin it by digest).
# With podman the machine's CA bundle is mounted read-only into the build (package
# registries behind a TLS-inspecting proxy); RUN steps share the host network.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
IMAGE="${IMAGE:-ghcr.io/kpo-dev/kpo:dev}"
PLACEMENT_IMAGE="${PLACEMENT_IMAGE:-ghcr.io/kpo-dev/kpo-placement:dev}"
ZOOKEEPER_IMAGE="${ZOOKEEPER_IMAGE:-localhost/kpo-zookeeper:dev}"
CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

log() { printf '[images %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

targets=("$@")
((${#targets[@]})) || targets=(kpo placement)

engine="${ENGINE:-}"
if [[ -z $engine ]]; then
  engine="$(bash "$HERE/containers.sh" engine-cmd 2>/dev/null || true)"
  if [[ -z $engine ]]; then
    bash "$HERE/containers.sh" engine
    engine=podman
  fi
fi
args=(build -f "$ROOT/broker-image/Dockerfile")
base="${BASE_IMAGE:-}"
if [[ $(basename "$engine") == podman ]]; then
  bash "$HERE/containers.sh" engine
  [[ -n $base ]] || base="$(bash "$HERE/containers.sh" base)"
  args+=(--layers --network host)
  [[ -f $CA_BUNDLE ]] && args+=(-v "$CA_BUNDLE:/etc/ssl/certs/ca-certificates.crt:ro")
fi
[[ -n $base ]] && args+=(--build-arg "BASE_IMAGE=$base")

for target in "${targets[@]}"; do
  case "$target" in
    kpo) tag="$IMAGE" ;;
    placement) tag="$PLACEMENT_IMAGE" ;;
    zookeeper) tag="$ZOOKEEPER_IMAGE" ;;
    *) echo "unknown target $target (kpo, placement, zookeeper)" >&2; exit 2 ;;
  esac
  log "$engine build --target $target -t $tag (base ${base:-as in the Dockerfile})"
  start=$SECONDS
  "$engine" "${args[@]}" --target "$target" -t "$tag" "$ROOT" >&2
  log "$tag built in $((SECONDS - start)) s, $("$engine" image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1 / 1e6}')"
done
