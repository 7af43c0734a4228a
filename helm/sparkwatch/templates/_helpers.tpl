{{/*
Expand the name of the chart.
*/}}
{{- define "sparkwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name.
We truncate at 63 chars because some Kubernetes name fields are limited to this (by the DNS naming spec).
If release name contains chart name it will be used as a full name.
*/}}
{{- define "sparkwatch.fullname" -}}
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

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "sparkwatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
A name derived from the fullname with a suffix, still within 63 characters.
*/}}
{{- define "sparkwatch.suffixed" -}}
{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "sparkwatch.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{/*
Common labels
*/}}
{{- define "sparkwatch.labels" -}}
helm.sh/chart: {{ include "sparkwatch.chart" . }}
{{ include "sparkwatch.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: sparkwatch
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels
*/}}
{{- define "sparkwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sparkwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: collector
{{- end }}

{{/*
Name of the service account to use
*/}}
{{- define "sparkwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sparkwatch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sparkwatch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Secret and key of the ingest tokens file. */}}
{{- define "sparkwatch.tokensSecret" -}}
{{- default (include "sparkwatch.suffixed" (list . "tokens")) .Values.auth.existingSecret }}
{{- end }}

{{/* Secret and key of the read token. */}}
{{- define "sparkwatch.readTokenSecret" -}}
{{- default (include "sparkwatch.suffixed" (list . "read-token")) .Values.auth.readToken.existingSecret }}
{{- end }}

{{/* Secret holding the PostgreSQL URL. */}}
{{- define "sparkwatch.historySecret" -}}
{{- default (include "sparkwatch.suffixed" (list . "history")) .Values.history.postgresql.existingSecret }}
{{- end }}

{{- define "sparkwatch.sqliteClaim" -}}
{{- default (include "sparkwatch.suffixed" (list . "sqlite")) .Values.history.sqlite.existingClaim }}
{{- end }}

{{- define "sparkwatch.spoolClaim" -}}
{{- default (include "sparkwatch.suffixed" (list . "spool")) .Values.spool.persistence.existingClaim }}
{{- end }}

{{/* Env var of the history URL (a Secret reference with PostgreSQL, a file path with SQLite). */}}
{{- define "sparkwatch.historyUrlEnv" -}}
- name: SPARKWATCH_COLLECTOR_HISTORY_URL
{{- if eq .Values.history.type "postgresql" }}
  valueFrom:
    secretKeyRef:
      name: {{ include "sparkwatch.historySecret" . }}
      key: {{ .Values.history.postgresql.existingSecretKey }}
{{- else }}
  value: sqlite:////var/lib/sparkwatch/history/sparkwatch.db
{{- end }}
{{- end }}

{{/* Refuse combinations the schema cannot express. */}}
{{- define "sparkwatch.validate" -}}
{{- $replicas := int .Values.replicaCount }}
{{- if and (eq .Values.history.type "sqlite") (or (gt $replicas 1) .Values.autoscaling.enabled) }}
{{- fail "history.type=sqlite allows a single replica: use history.type=postgresql to scale out" }}
{{- end }}
{{- if and .Values.spool.persistence.enabled (or (gt $replicas 1) .Values.autoscaling.enabled) }}
{{- fail "spool.persistence.enabled allows a single replica (a spool is never shared)" }}
{{- end }}
{{- if and (eq .Values.history.type "postgresql") (not (or .Values.history.postgresql.url .Values.history.postgresql.existingSecret)) }}
{{- fail "history.type=postgresql needs history.postgresql.url or history.postgresql.existingSecret" }}
{{- end }}
{{- end }}

{{/* A generated secret value kept across upgrades: the live Secret's, else a new random one. */}}
{{- define "sparkwatch.keptSecret" -}}
{{- $ctx := index . 0 }}{{- $name := index . 1 }}{{- $key := index . 2 }}
{{- $live := lookup "v1" "Secret" $ctx.Release.Namespace $name }}
{{- if and $live (hasKey $live.data $key) }}
{{- index $live.data $key | b64dec }}
{{- else }}
{{- randAlphaNum 40 }}
{{- end }}
{{- end }}

{{/* Secret of the tenant read tokens, and of the scrape token. */}}
{{- define "sparkwatch.tenantReadTokensSecret" -}}
{{- default (include "sparkwatch.suffixed" (list . "tenant-read-tokens")) .Values.auth.tenantReadTokens.existingSecret }}
{{- end }}

{{- define "sparkwatch.scrapeTokenSecret" -}}
{{- default (include "sparkwatch.suffixed" (list . "scrape-token")) .Values.auth.scrapeToken.existingSecret }}
{{- end }}
