#!/usr/bin/env bash
# Install Apache Kafka from Maven Central for `make bench` and the operator's tests,
# idempotently, into a cache folder outside the checkout:
#   $KPO_TOOLS_DIR/kafka-<version>/libs/*.jar   (default ~/.cache/kpo-tools)
# Usage: install-kafka.sh [VERSION | 4]; VERSION defaults to KAFKA_VERSION (3.9.x,
# ZooKeeper mode); `4` means KAFKA4_VERSION (4.x, KRaft only, Java 17), which
# `make tools` installs too.
# It holds org.apache.kafka:kafka_2.13 (the broker, main class kafka.Kafka) and
# org.apache.kafka:kafka-tools (ProducerPerformance) with all their runtime
# dependencies, fetched by `mvn dependency:copy-dependencies`. It also makes sure
# a JDK's javac is there: the benchmark compiles its consumer (bench/kpo_bench/java).
# The version is pinned in tools/versions.env (KAFKA_VERSION); 3.9.x is the
# last Kafka line that still runs with ZooKeeper; KAFKA4_VERSION is the newest 4.x
# (KRaft, log4j2: bound to slf4j through log4j-slf4j-impl as in Kafka's own
# distribution). A warm run only checks a stamp.
# Prints the install folder on stdout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
: "${KAFKA_VERSION:?KAFKA_VERSION missing from tools/versions.env}"
KAFKA_VERSION="${1:-$KAFKA_VERSION}"
if [[ $KAFKA_VERSION == 4 ]]; then KAFKA_VERSION="${KAFKA4_VERSION:?KAFKA4_VERSION missing from tools/versions.env}"; fi
# 3.x logs through reload4j (log4j 1 API), 4.x through log4j2.
case "$KAFKA_VERSION" in
  3.*) SLF4J_BINDING="<groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version>" ;;
  *) SLF4J_BINDING="<groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.3</version>" ;;
esac
TOOLS_DIR="${KPO_TOOLS_DIR:-$HOME/.cache/kpo-tools}"
STAMPS="$TOOLS_DIR/stamps"
DEST="$TOOLS_DIR/kafka-$KAFKA_VERSION"
mkdir -p "$STAMPS"

log() { printf '[tools %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

apt_install() {
  log "kafka: apt-get install $*"
  local sudo=""; [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

command -v javac >/dev/null || apt_install default-jdk-headless

stamp="kafka_2.13+kafka-tools $KAFKA_VERSION"
# One stamp per major line: `kafka` (3.x, as before) and `kafka-4`.
stamp_file="$STAMPS/kafka"; [[ $KAFKA_VERSION == 3.* ]] || stamp_file="$STAMPS/kafka-${KAFKA_VERSION%%.*}"
if [[ -f "$stamp_file" && "$(cat "$stamp_file")" == "$stamp" ]] \
  && [[ -f "$DEST/libs/kafka_2.13-$KAFKA_VERSION.jar" ]] \
  && [[ -f "$DEST/libs/kafka-tools-$KAFKA_VERSION.jar" ]]; then
  log "kafka $KAFKA_VERSION: cached"
  echo "$DEST"
  exit 0
fi

command -v mvn >/dev/null || apt_install maven

log "kafka $KAFKA_VERSION: mvn dependency:copy-dependencies (kafka_2.13, kafka-tools)"
work="$(mktemp -d "$TOOLS_DIR/.kafka-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kpo.local</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <!-- The broker logs through slf4j; bound as in Kafka's own distribution. -->
    <dependency>$SLF4J_BINDING</dependency>
  </dependencies>
</project>
POM
(cd "$work" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$work/libs") >&2
rm -rf "$DEST"
mkdir -p "$DEST"
mv "$work/libs" "$DEST/libs"
printf '%s' "$stamp" >"$stamp_file"
log "kafka $KAFKA_VERSION: $(find "$DEST/libs" -name '*.jar' | wc -l) jars in $DEST/libs"
echo "$DEST"
