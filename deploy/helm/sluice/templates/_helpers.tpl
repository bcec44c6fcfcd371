{{/* The chart name, or nameOverride. */}}
{{- define "sluice.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resource name: fullnameOverride, else RELEASE-NAME (RELEASE if it holds NAME). */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version, for the helm.sh/chart label. */}}
{{- define "sluice.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The labels every resource carries besides its component's. */}}
{{- define "sluice.commonLabels" -}}
helm.sh/chart: {{ include "sluice.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The labels of Sluice's own resources. */}}
{{- define "sluice.labels" -}}
{{ include "sluice.commonLabels" . }}
{{ include "sluice.selectorLabels" . }}
{{- end }}

{{/* The labels that select the Sluice pods (and not the bundled Redis's). */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end }}

{{/* The labels of the bundled Redis's resources. */}}
{{- define "sluice.redisLabels" -}}
{{ include "sluice.commonLabels" . }}
{{ include "sluice.redisSelectorLabels" . }}
{{- end }}

{{/* The labels that select the bundled Redis pod. */}}
{{- define "sluice.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{/* The Secret with the state keys and API keys: secrets.existingSecret, or the chart's. */}}
{{- define "sluice.secretName" -}}
{{- default (include "sluice.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* The Secret holding sluice.toml. */}}
{{- define "sluice.configName" -}}
{{- printf "%s-config" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The bundled Redis's resource name. */}}
{{- define "sluice.redisName" -}}
{{- printf "%s-redis" (include "sluice.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* cluster.redis_url: the bundled Redis's Service, else redis.externalUrl (required then). */}}
{{- define "sluice.redisUrl" -}}
{{- if .Values.redis.enabled }}
{{- printf "redis://%s:6379/0" (include "sluice.redisName" .) }}
{{- else }}
{{- required "redis.externalUrl is required when redis.enabled is false (redis://host:port/db)" .Values.redis.externalUrl }}
{{- end }}
{{- end }}
