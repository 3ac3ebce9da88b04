#!/usr/bin/env bash
# Install Apache Kafka (ZooKeeper mode) from Maven Central for `make bench`,
# idempotently, into a cache folder outside the checkout:
#   $KPO_TOOLS_DIR/kafka-<KAFKA_VERSION>/libs/*.jar   (default ~/.cache/kpo-tools)
# It holds org.apache.kafka:kafka_2.13 (the broker, main class kafka.Kafka) and
# org.apache.kafka:kafka-tools (ProducerPerformance) with all their runtime
# dependencies, fetched by `mvn dependency:copy-dependencies`. It also makes sure
# a JDK's javac is there: the benchmark compiles its consumer (bench/kpo_bench/java).
# The version is pinned in tools/versions.env (KAFKA_VERSION); 3.9.x is the
# last Kafka line that still runs with ZooKeeper. A warm run only checks a stamp.
# Prints the install folder on stdout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
: "${KAFKA_VERSION:?KAFKA_VERSION missing from tools/versions.env}"
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
if [[ -f "$STAMPS/kafka" && "$(cat "$STAMPS/kafka")" == "$stamp" ]] \
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
    <!-- The broker logs through slf4j; Kafka's own distribution binds it to reload4j. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
</project>
POM
(cd "$work" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$work/libs") >&2
rm -rf "$DEST"
mkdir -p "$DEST"
mv "$work/libs" "$DEST/libs"
printf '%s' "$stamp" >"$STAMPS/kafka"
log "kafka $KAFKA_VERSION: $(find "$DEST/libs" -name '*.jar' | wc -l) jars in $DEST/libs"
echo "$DEST"
