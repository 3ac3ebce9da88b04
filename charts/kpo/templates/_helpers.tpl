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
{{- else -}}
{{ include "kpo.broker.name" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ .Values.broker.port }}
{{- end -}}
{{- end -}}

{{/* Per-broker metrics URL template for the placement job. */}}
{{- define "kpo.metricsUrlTemplate" -}}
{{- if .Values.placement.metricsUrlTemplate -}}
{{ .Values.placement.metricsUrlTemplate }}
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
