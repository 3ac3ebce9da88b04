#!/bin/sh
# zkServer.sh start-foreground <zoo.cfg>: the command the chart's ZooKeeper container runs
# (as the official zookeeper image provides it), here over Debian's ZooKeeper jars, so this
# image can stand in for the official one where no registry is reachable. JVMFLAGS carries
# the JVM options (e.g. -Djava.security.auth.login.config for SASL), as in zkServer.sh.
set -eu
if [ "$#" -ne 2 ] || [ "$1" != "start-foreground" ]; then
  echo "usage: zkServer.sh start-foreground <zoo.cfg> (the only mode of this image)" >&2
  exit 2
fi
# Debian's zookeeper.jar does not name Netty's codec jar in its manifest; a TLS client port
# (NettyServerCnxnFactory) needs it.
# shellcheck disable=SC2086 # JVMFLAGS is a list of options
exec java ${JVMFLAGS:-} -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar:/usr/share/java/netty-codec.jar \
  org.apache.zookeeper.server.quorum.QuorumPeerMain "$2"
