{{/* Chart name, truncated to fit label values. */}}
{{- define "kpo.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped base name: "<release>-kpo", or the release name when it contains "kpo". */}}
{{- define "kpo.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Object names of the components. */}}
{{- define "kpo.zookeeper.name" -}}{{ include "kpo.fullname" . }}-zookeeper{{- end -}}
{{- define "kpo.broker.name" -}}{{ include "kpo.fullname" . }}-broker{{- end -}}
{{- define "kpo.broker.headless" -}}{{ include "kpo.fullname" . }}-broker-headless{{- end -}}
{{- define "kpo.operator.name" -}}{{ include "kpo.fullname" . }}-operator{{- end -}}
{{- define "kpo.placement.name" -}}{{ include "kpo.fullname" . }}-placement{{- end -}}

{{/* Common labels; call with (dict "ctx" $ "component" "broker"). */}}
{{- define "kpo.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "kpo.selectorLabels" . }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels; call with (dict "ctx" $ "component" "broker"). */}}
{{- define "kpo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kpo.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* An image reference from {repository, tag, digest}; call with (dict "image" ... "default" tag). */}}
{{- define "kpo.imageRef" -}}
{{- if .image.digest -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .default }}
{{- end -}}
{{- end -}}

{{- define "kpo.image" -}}
{{ include "kpo.imageRef" (dict "image" .Values.image "default" .Chart.AppVersion) }}
{{- end -}}

{{- define "kpo.placementImage" -}}
{{ include "kpo.imageRef" (dict "image" .Values.placement.image "default" .Chart.AppVersion) }}
{{- end -}}

{{/* Pod-level secure defaults: non-root, RuntimeDefault seccomp. */}}
{{- define "kpo.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid | default 10001 }}
runAsGroup: {{ .uid | default 10001 }}
fsGroup: {{ .uid | default 10001 }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level secure defaults: read-only root filesystem, no capabilities. */}}
{{- define "kpo.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "kpo.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* zookeeper.connect of the brokers, with the chroot. */}}
{{- define "kpo.zookeeper.connect" -}}
{{- if .Values.zookeeper.enabled -}}
{{- $name := include "kpo.zookeeper.name" . -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.zookeeper.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s-headless.%s.svc.%s:%d" $name $i $name $.Release.Namespace $.Values.clusterDomain (int $.Values.zookeeper.clientPort)) -}}
{{- end -}}
{{ join "," $hosts }}{{ .Values.broker.zookeeperChroot }}
{{- else -}}
{{- required "zookeeper.externalConnect is required when zookeeper.enabled is false" .Values.zookeeper.externalConnect -}}
{{- end -}}
{{- end -}}

{{/* Bootstrap servers of the operator and the placement job. */}}
{{- define "kpo.bootstrapServers" -}}
{{- if .Values.operator.bootstrapServers -}}
{{ .Values.operator.bootstrapServers }}
{{- else if ne .Values.mode "bundled" -}}
{{- fail "operator.bootstrapServers is required in mode operator-only (the existing cluster's host:port,...)" -}}
{{- else -}}
{{ include "kpo.broker.name" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ .Values.broker.port }}
{{- end -}}
{{- end -}}

{{/* Per-broker metrics URL template for the placement job. */}}
{{- define "kpo.metricsUrlTemplate" -}}
{{- if .Values.placement.metricsUrlTemplate -}}
{{ .Values.placement.metricsUrlTemplate }}
{{- else if ne .Values.mode "bundled" -}}
{{- fail "placement in mode operator-only needs a metrics source: placement.prometheusUrl, placement.metricsUrls or placement.metricsUrlTemplate" -}}
{{- else -}}
http://{{ include "kpo.broker.name" . }}-{id}.{{ include "kpo.broker.headless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ .Values.metrics.port }}/metrics
{{- end -}}
{{- end -}}

{{/* The operator's namespaced rules (Role or ClusterRole). */}}
{{- define "kpo.operator.rules" -}}
- apiGroups: [kpo.dev]
  resources: [partitionreassignments, topicreplicaquotas]
  verbs: [get, list, watch, patch]
- apiGroups: [kpo.dev]
  resources: [partitionreassignments/status, topicreplicaquotas/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/* Kafka client security of the operator and the placement job (values kafkaClient):
     KPO_KAFKA_* variables read by kpo_kafka.client_config, secrets only as mounted files. */}}
{{- define "kpo.kafkaClient.dir" -}}/etc/kpo/kafka-client{{- end -}}

{{- define "kpo.kafkaClient.env" -}}
{{- $c := .Values.kafkaClient -}}
{{- $dir := include "kpo.kafkaClient.dir" . -}}
{{- $tls := has $c.securityProtocol (list "SSL" "SASL_SSL") -}}
{{- $sasl := has $c.securityProtocol (list "SASL_PLAINTEXT" "SASL_SSL") -}}
{{- if ne $c.securityProtocol "PLAINTEXT" }}
- {name: KPO_KAFKA_SECURITY_PROTOCOL, value: {{ $c.securityProtocol | quote }}}
{{- end }}
{{- if $tls }}
- {name: KPO_KAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, value: {{ ternary "https" "" $c.verifyHostname | quote }}}
{{- if $c.secret.caKey }}
- {name: KPO_KAFKA_SSL_TRUSTSTORE_TYPE, value: PEM}
- {name: KPO_KAFKA_SSL_TRUSTSTORE_LOCATION, value: {{ printf "%s/%s" $dir $c.secret.caKey | quote }}}
{{- end }}
{{- if $c.secret.certificateKey }}
- {name: KPO_KAFKA_SSL_KEYSTORE_TYPE, value: PEM}
- {name: KPO_KAFKA_SSL_KEYSTORE_CERTIFICATE_CHAIN_FILE, value: {{ printf "%s/%s" $dir $c.secret.certificateKey | quote }}}
- {name: KPO_KAFKA_SSL_KEYSTORE_KEY_FILE, value: {{ printf "%s/%s" $dir $c.secret.privateKeyKey | quote }}}
{{- end }}
{{- end }}
{{- if $sasl }}
- {name: KPO_KAFKA_SASL_MECHANISM, value: {{ $c.saslMechanism | quote }}}
- {name: KPO_KAFKA_SASL_USERNAME, value: {{ $c.saslUsername | quote }}}
- {name: KPO_KAFKA_SASL_PASSWORD_FILE, value: {{ printf "%s/%s" $dir $c.secret.passwordKey | quote }}}
{{- end }}
{{- end -}}

{{/* Fail on settings that cannot work (the schema checks each value alone). */}}
{{- define "kpo.kafkaClient.check" -}}
{{- $c := .Values.kafkaClient -}}
{{- $tls := has $c.securityProtocol (list "SSL" "SASL_SSL") -}}
{{- $sasl := has $c.securityProtocol (list "SASL_PLAINTEXT" "SASL_SSL") -}}
{{- if and $sasl (or (not $c.saslUsername) (not $c.secret.name) (not $c.secret.passwordKey)) }}
{{- fail (printf "kafkaClient.securityProtocol %s needs kafkaClient.saslUsername, kafkaClient.secret.name and kafkaClient.secret.passwordKey" $c.securityProtocol) }}
{{- end }}
{{- if and $tls (or $c.secret.caKey $c.secret.certificateKey) (not $c.secret.name) }}
{{- fail "kafkaClient.secret.caKey/certificateKey need kafkaClient.secret.name" }}
{{- end }}
{{- if ne (not $c.secret.certificateKey) (not $c.secret.privateKeyKey) }}
{{- fail "kafkaClient.secret.certificateKey and privateKeyKey go together (mutual TLS)" }}
{{- end }}
{{- end -}}

{{- define "kpo.kafkaClient.mounts" -}}
{{- if and .Values.kafkaClient.secret.name (ne .Values.kafkaClient.securityProtocol "PLAINTEXT") }}
- {name: kafka-client, mountPath: {{ include "kpo.kafkaClient.dir" . }}, readOnly: true}
{{- end }}
{{- end -}}

{{- define "kpo.kafkaClient.volumes" -}}
{{- if and .Values.kafkaClient.secret.name (ne .Values.kafkaClient.securityProtocol "PLAINTEXT") }}
- name: kafka-client
  secret: {secretName: {{ .Values.kafkaClient.secret.name | quote }}, defaultMode: 0440}
{{- end }}
{{- end -}}
