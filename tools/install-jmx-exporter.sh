#!/usr/bin/env bash
# Install the Prometheus JMX exporter's Java agent (io.prometheus.jmx:jmx_prometheus_javaagent)
# from Maven Central, idempotently, outside the checkout and off Kafka's class path:
#   $KPO_TOOLS_DIR/jmx-exporter-<JMX_EXPORTER_VERSION>/jmx_prometheus_javaagent-<version>.jar
# Attached to Apache Kafka's brokers with deploy/jmx-exporter/kafka-kpo-rules.yaml, it serves
# the metric names the placement job's collector reads (the operator's tests on real Kafka).
# Prints the jar's path on stdout.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$HERE/versions.env"
: "${JMX_EXPORTER_VERSION:?JMX_EXPORTER_VERSION missing from tools/versions.env}"
TOOLS_DIR="${KPO_TOOLS_DIR:-$HOME/.cache/kpo-tools}"
DEST="$TOOLS_DIR/jmx-exporter-$JMX_EXPORTER_VERSION"
JAR="$DEST/jmx_prometheus_javaagent-$JMX_EXPORTER_VERSION.jar"
log() { printf '[tools %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
if [[ -f "$JAR" ]]; then
  log "jmx exporter $JMX_EXPORTER_VERSION: cached"
  echo "$JAR"
  exit 0
fi
command -v mvn >/dev/null || { log "mvn missing: run tools/install-kafka.sh first"; exit 1; }
log "jmx exporter $JMX_EXPORTER_VERSION: mvn dependency:copy-dependencies"
mkdir -p "$TOOLS_DIR"
work="$(mktemp -d "$TOOLS_DIR/.jmx-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kpo.local</groupId>
  <artifactId>jmx-exporter</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>io.prometheus.jmx</groupId>
      <artifactId>jmx_prometheus_javaagent</artifactId>
      <version>$JMX_EXPORTER_VERSION</version>
    </dependency>
  </dependencies>
</project>
POM
(cd "$work" && mvn -B -q -Dstyle.color=never dependency:copy-dependencies \
  -DexcludeTransitive=true -DoutputDirectory="$work/libs") >&2
mkdir -p "$DEST"
mv "$work/libs/jmx_prometheus_javaagent-$JMX_EXPORTER_VERSION.jar" "$JAR"
echo "$JAR"
