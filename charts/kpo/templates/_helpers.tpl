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
  resources: [partitionreassignments, topicreplicaquotas, kafkaclusters]
  verbs: [get, list, watch, patch]
- apiGroups: [kpo.dev]
  resources: [partitionreassignments/status, topicreplicaquotas/status, kafkaclusters/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
{{- end -}}

{{/* Kafka client security of the operator, the placement job and the helm test: KPO_KAFKA_*
     variables read by kpo_kafka.client_config, secrets only as mounted files. The settings
     are values kafkaClient when its securityProtocol is set (an external Kafka), else the
     chart's own fleet: SASL_SSL as the component's SCRAM user (security.scram.users), its
     password and the fleet's CA projected from Secrets; PLAINTEXT with security.plaintext
     or, in mode operator-only, when kafkaClient.securityProtocol is not set.
     Call with (dict "ctx" $ "component" "operator"|"placement"|"test"). */}}
{{- define "kpo.kafkaClient.dir" -}}/etc/kpo/kafka-client{{- end -}}

{{- define "kpo.kafkaClient.settings" -}}
{{- $v := .ctx.Values -}}
{{- if $v.kafkaClient.securityProtocol -}}
{{- toJson (merge (dict "projected" false) $v.kafkaClient) -}}
{{- else if ne (include "kpo.secure" .ctx) "true" -}}
{{- toJson (dict "securityProtocol" "PLAINTEXT" "projected" false "secret" (dict)) -}}
{{- else -}}
{{- $secret := dict "name" (include "kpo.user.secret" (dict "ctx" .ctx "component" .component)) "caKey" "ca.crt" "certificateKey" "" "privateKeyKey" "" "passwordKey" "password" -}}
{{- toJson (dict "securityProtocol" "SASL_SSL" "saslMechanism" $v.security.scram.mechanism "saslUsername" (index $v.security.scram.users .component) "verifyHostname" true "projected" true "secret" $secret) -}}
{{- end -}}
{{- end -}}

{{- define "kpo.kafkaClient.env" -}}
{{- $c := include "kpo.kafkaClient.settings" . | fromJson -}}
{{- $dir := include "kpo.kafkaClient.dir" .ctx -}}
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
{{- $c := include "kpo.kafkaClient.settings" . | fromJson -}}
{{- if and $c.secret.name (ne $c.securityProtocol "PLAINTEXT") }}
- {name: kafka-client, mountPath: {{ include "kpo.kafkaClient.dir" .ctx }}, readOnly: true}
{{- end }}
{{- end -}}

{{- define "kpo.kafkaClient.volumes" -}}
{{- $c := include "kpo.kafkaClient.settings" . | fromJson -}}
{{- if and $c.secret.name (ne $c.securityProtocol "PLAINTEXT") }}
{{- if $c.projected }}
- name: kafka-client
  projected:
    defaultMode: 0440
    sources:
      - secret: {name: {{ $c.secret.name | quote }}, items: [{key: password, path: password}]}
      - secret: {name: {{ include "kpo.tls.caSecret" .ctx | quote }}, items: [{key: ca.crt, path: ca.crt}]}
{{- else }}
- name: kafka-client
  secret: {secretName: {{ $c.secret.name | quote }}, defaultMode: 0440}
{{- end }}
{{- end }}
{{- end -}}

{{/* --- Security of the chart's own fleet (values security) --------------------------- */}}

{{/* "true" unless security.plaintext. */}}
{{/* Whether the chart's own fleet is secured (nothing to secure in mode operator-only). */}}
{{- define "kpo.secure" -}}{{ and (not .Values.security.plaintext) (eq .Values.mode "bundled") }}{{- end -}}

{{/* Where the broker certificates come from: certManager, generated or secret. */}}
{{- define "kpo.tls.source" -}}
{{- $s := .Values.security.tls.source -}}
{{- if eq $s "auto" -}}
{{- ternary "certManager" "generated" (.Capabilities.APIVersions.Has "cert-manager.io/v1") -}}
{{- else -}}
{{- $s -}}
{{- end -}}
{{- end -}}

{{/* Secret of broker <ordinal>'s cert-manager Certificate. */}}
{{- define "kpo.tls.brokerSecret" -}}{{ include "kpo.broker.name" .ctx }}-{{ .ordinal }}-tls{{- end -}}

{{/* The Secret whose key ca.crt is the CA of the brokers' certificates. */}}
{{- define "kpo.tls.caSecret" -}}
{{- $source := include "kpo.tls.source" . -}}
{{- if eq $source "certManager" -}}
{{ include "kpo.tls.brokerSecret" (dict "ctx" . "ordinal" 0) }}
{{- else if eq $source "secret" -}}
{{ required "security.tls.existingSecret is required when security.tls.source is secret" .Values.security.tls.existingSecret }}
{{- else -}}
{{ include "kpo.fullname" . }}-broker-tls
{{- end -}}
{{- end -}}

{{/* Subject common name of every broker certificate; User:CN=<it> is the super user. */}}
{{- define "kpo.tls.brokerCN" -}}{{ include "kpo.broker.name" . }}{{- end -}}

{{/* DNS names of broker <ordinal>'s certificate; call with (dict "ctx" $ "ordinal" i). */}}
{{- define "kpo.tls.dnsNames" -}}
{{- $ctx := .ctx -}}
{{- $name := include "kpo.broker.name" $ctx -}}
{{- $ns := $ctx.Release.Namespace -}}
{{- $names := list (printf "%s-%d.%s.%s.svc.%s" $name (int .ordinal) (include "kpo.broker.headless" $ctx) $ns $ctx.Values.clusterDomain) (printf "%s.%s.svc.%s" $name $ns $ctx.Values.clusterDomain) (printf "%s.%s.svc" $name $ns) (printf "%s.%s" $name $ns) $name -}}
{{- toJson (concat $names $ctx.Values.security.tls.extraDnsNames) -}}
{{- end -}}

{{/* The Secret holding a component's SCRAM password (key password). */}}
{{- define "kpo.user.secret" -}}{{ include "kpo.fullname" .ctx }}-user-{{ .component }}{{- end -}}

{{/* The Secret holding the brokers' ZooKeeper SASL password (key password). */}}
{{- define "kpo.zookeeper.saslSecret" -}}
{{- if .Values.security.zookeeper.existingSecret -}}
{{ .Values.security.zookeeper.existingSecret }}
{{- else -}}
{{ include "kpo.fullname" . }}-zookeeper-sasl
{{- end -}}
{{- end -}}

{{/* A password kept across upgrades: the existing Secret's key, else a new random one.
     Call with (dict "ctx" $ "name" secretName "key" "password"). */}}
{{- define "kpo.keptPassword" -}}
{{- $existing := lookup "v1" "Secret" .ctx.Release.Namespace .name -}}
{{- if and $existing $existing.data (hasKey $existing.data .key) -}}
{{ index $existing.data .key | b64dec }}
{{- else -}}
{{ randAlphaNum 32 }}
{{- end -}}
{{- end -}}

{{/* The brokers' inter-broker (INTERNAL, mutual TLS) addresses, for the bootstrap Job. */}}
{{- define "kpo.internalBootstrapServers" -}}
{{- $name := include "kpo.broker.name" . -}}
{{- $headless := include "kpo.broker.headless" . -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.broker.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s.%s.svc.%s:%d" $name $i $headless $.Release.Namespace $.Values.clusterDomain (int $.Values.broker.internalPort)) -}}
{{- end -}}
{{ join "," $hosts }}
{{- end -}}

{{/* The broker's listeners: CLIENT (SASL_SSL) and INTERNAL (SSL), or PLAINTEXT; call with
     (dict "ctx" $ "host" "<host>"). */}}
{{- define "kpo.broker.listeners" -}}
{{- $b := .ctx.Values.broker -}}
{{- if eq (include "kpo.secure" .ctx) "true" -}}
CLIENT://{{ .host }}:{{ $b.port }},INTERNAL://{{ .host }}:{{ $b.internalPort }}
{{- else -}}
PLAINTEXT://{{ .host }}:{{ $b.port }}
{{- end -}}
{{- end -}}
