#!/usr/bin/env bash
# make e2e-kind: the main job against the stack installed in a kind cluster (needs Docker or
# Podman, kind, kubectl and helm on PATH; not run by CI, which has no container engine).
#  1. create a kind cluster, build the image and load it into the cluster;
#  2. helm install the chart (ZooKeeper, 3 brokers, the operator) and run its helm test;
#  3. create a topic, produce data, apply a throttled PartitionReassignment with kubectl,
#     wait for Completed, check the replicas and that the throttles are gone;
#  4. delete the cluster (also on failure).
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${KIND_CLUSTER:-kpo-e2e}
IMAGE=${IMAGE:-ghcr.io/kpo-dev/kpo:e2e}
NS=${NAMESPACE:-kpo}
ENGINE=${ENGINE:-$(command -v docker || command -v podman || true)}
[ -n "$ENGINE" ] || { echo "e2e-kind needs docker or podman" >&2; exit 2; }
for tool in kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool on PATH" >&2; exit 2; }
done

cleanup() { kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT

kind create cluster --name "$CLUSTER" --wait 120s
"$ENGINE" build -f broker-image/Dockerfile -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

helm install kpo charts/kpo --namespace "$NS" --create-namespace \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" \
  --set image.pullPolicy=Never --set zookeeper.replicas=1 \
  --set "operator.watchNamespaces={$NS}" --wait --timeout 10m
helm test kpo --namespace "$NS" --timeout 5m

BOOTSTRAP=kpo-broker.$NS.svc.cluster.local:9092  # the chart's client Service (release "kpo")
# The chart is secured: SASL_SSL as the operator's SCRAM user, trusting the generated CA.
PASSWORD=$(kubectl -n "$NS" get secret kpo-user-operator -o jsonpath='{.data.password}' | base64 -d)
CA=$(kubectl -n "$NS" get secret kpo-broker-tls -o jsonpath='{.data.ca\.crt}' | base64 -d)
# Topic on brokers 0 and 1, 20 MiB of data, then move partition 0 to broker 2 at 2 MiB/s.
kubectl -n "$NS" run kpo-e2e-data --rm -i --restart=Never --image="$IMAGE" \
  --labels="app.kubernetes.io/name=kpo,app.kubernetes.io/instance=kpo" \
  --image-pull-policy=Never --env="BOOTSTRAP=$BOOTSTRAP" \
  --env=KPO_KAFKA_SECURITY_PROTOCOL=SASL_SSL --env=KPO_KAFKA_SASL_MECHANISM=SCRAM-SHA-512 \
  --env=KPO_KAFKA_SASL_USERNAME=kpo-operator --env="KPO_KAFKA_SASL_PASSWORD=$PASSWORD" \
  --env=KPO_KAFKA_SSL_TRUSTSTORE_TYPE=PEM --env="KPO_KAFKA_SSL_TRUSTSTORE_CERTIFICATES=$CA" \
  -- python - <<'PY'
import os
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kpo_kafka.client_config import client_security_from_env
bootstrap = os.environ["BOOTSTRAP"]
client = client_security_from_env().kafka_python_kwargs()
admin = KafkaAdminClient(bootstrap_servers=bootstrap, **client)
admin.create_topics([NewTopic("orders", -1, -1, replica_assignments={0: [0, 1]})])
producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **client)
for _ in range(1280):
    producer.send("orders", b"x" * 16384, partition=0)
producer.flush()
PY
kubectl -n "$NS" apply -f - <<'YAML'
apiVersion: kpo.dev/v1alpha1
kind: PartitionReassignment
metadata:
  name: e2e-move
spec:
  partitions:
    - {topic: orders, partition: 0, replicas: [2, 1]}
  throttle:
    replicationRate: 2097152
YAML
kubectl -n "$NS" wait --for=condition=Completed partitionreassignment/e2e-move --timeout=10m
kubectl -n "$NS" get partitionreassignment e2e-move -o wide
echo "e2e-kind passed"
