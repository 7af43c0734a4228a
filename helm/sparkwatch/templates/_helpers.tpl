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
Common labels. A map, not lines: commonLabels may override the chart's informational labels
(part-of, ...) without a key appearing twice; the selector labels always win (the schema refuses
them in commonLabels and podLabels too, so a user label can never detach a selector).
*/}}
{{- define "sparkwatch.labels" -}}
{{- $chart := dict "helm.sh/chart" (include "sparkwatch.chart" .) "app.kubernetes.io/managed-by" .Release.Service "app.kubernetes.io/part-of" "sparkwatch" }}
{{- if .Chart.AppVersion }}
{{- $_ := set $chart "app.kubernetes.io/version" .Chart.AppVersion }}
{{- end }}
{{- $selector := include "sparkwatch.selectorLabels" . | fromYaml }}
{{- toYaml (mergeOverwrite (dict) $chart (.Values.commonLabels | default dict) $selector) }}
{{- end }}

{{/*
Labels of a pod or resource of another component (the migration Job): the common labels with
that component.
*/}}
{{- define "sparkwatch.componentLabels" -}}
{{- $ctx := index . 0 }}
{{- $labels := include "sparkwatch.labels" $ctx | fromYaml }}
{{- toYaml (set $labels "app.kubernetes.io/component" (index . 1)) }}
{{- end }}

{{/*
The common labels with more of them (podLabels, a monitor's labels for the operator's selector):
those override the common ones, never the selector labels.
*/}}
{{- define "sparkwatch.labelsWith" -}}
{{- $ctx := index . 0 }}
{{- $labels := include "sparkwatch.labels" $ctx | fromYaml }}
{{- $selector := include "sparkwatch.selectorLabels" $ctx | fromYaml }}
{{- toYaml (mergeOverwrite $labels (index . 1 | default dict) $selector) }}
{{- end }}

{{/*
Selector labels
*/}}
{{- define "sparkwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sparkwatch.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
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
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
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
      name: {{ include "sparkwatch.historySecret" . | quote }}
      key: {{ .Values.history.postgresql.existingSecretKey | quote }}
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
{{- include "sparkwatch.validateAuth" . }}
{{- include "sparkwatch.validateAutoscaling" . }}
{{- include "sparkwatch.validateDisruptionBudget" . }}
{{- include "sparkwatch.validateSpool" . }}
{{- include "sparkwatch.validateBodies" . }}
{{- end }}

{{/*
The collector refuses to start when the in-flight bound is below the body limit (a request at the
limit could never be decoded). $body is the collector's default max_body_bytes (a test keeps it
equal).
*/}}
{{- define "sparkwatch.validateBodies" -}}
{{- $body := 16777216 }}
{{- with .Values.collector.config }}
{{- with .max_body_bytes }}{{ $body = . }}{{ end }}
{{- with .max_inflight_body_bytes }}
{{- if lt (float64 .) (float64 $body) }}
{{- fail (printf "collector.config.max_inflight_body_bytes (%s) is smaller than collector.config.max_body_bytes (%s): the collector refuses to start, as a request at the body limit could never be decoded" (include "sparkwatch.number" .) (include "sparkwatch.number" $body)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The collector refuses to start with tenant read tokens but no admin read or scrape token. */}}
{{- define "sparkwatch.validateAuth" -}}
{{- $auth := .Values.auth }}
{{- if and (or $auth.tenantReadTokens.tokens $auth.tenantReadTokens.existingSecret) (not (or $auth.readToken.enabled $auth.scrapeToken.enabled)) }}
{{- fail "auth.tenantReadTokens needs auth.readToken.enabled or auth.scrapeToken.enabled: the collector refuses to start, as /metrics would show every tenant's series to anyone" }}
{{- end }}
{{- end }}

{{- define "sparkwatch.validateAutoscaling" -}}
{{- $hpa := .Values.autoscaling }}
{{- if $hpa.enabled }}
{{- if not (dig "requests" "cpu" "" (.Values.resources | default dict)) }}
{{- fail "autoscaling.enabled needs resources.requests.cpu: the HorizontalPodAutoscaler's CPU target is a percentage of the request, and without one it never scales" }}
{{- end }}
{{- if gt (int $hpa.minReplicas) (int $hpa.maxReplicas) }}
{{- fail (printf "autoscaling.minReplicas (%d) is larger than autoscaling.maxReplicas (%d)" (int $hpa.minReplicas) (int $hpa.maxReplicas)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A PodDisruptionBudget no eviction can satisfy blocks every node drain: minAvailable covering every
replica (with one replica, any minAvailable above 0), or maxUnavailable 0. Percentages round up, as
the disruption controller rounds them.
*/}}
{{- define "sparkwatch.validateDisruptionBudget" -}}
{{- $pdb := .Values.podDisruptionBudget }}
{{- $autoscaled := .Values.autoscaling.enabled }}
{{- $replicas := ternary (int .Values.autoscaling.minReplicas) (int .Values.replicaCount) $autoscaled }}
{{- $replicasKey := ternary "autoscaling.minReplicas" "replicaCount" $autoscaled }}
{{- if and $pdb.enabled (gt $replicas 0) }}
{{- if not (kindIs "invalid" $pdb.maxUnavailable) }}
{{- if eq (include "sparkwatch.scaledCount" (list $pdb.maxUnavailable $replicas)) "0" }}
{{- fail (printf "podDisruptionBudget.maxUnavailable (%v) lets no pod be evicted: every node drain would block" $pdb.maxUnavailable) }}
{{- end }}
{{- else if ge (int (include "sparkwatch.scaledCount" (list $pdb.minAvailable $replicas))) $replicas }}
{{- fail (printf "podDisruptionBudget.minAvailable (%v) keeps all %d replica(s) (%s) available: no pod could be evicted and every node drain would block; raise %s, lower minAvailable, set podDisruptionBudget.maxUnavailable or leave podDisruptionBudget.enabled off" $pdb.minAvailable $replicas $replicasKey $replicasKey) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Pods a PodDisruptionBudget count or percentage stands for, out of a number of replicas. */}}
{{- define "sparkwatch.scaledCount" -}}
{{- $value := index . 0 }}{{- $replicas := index . 1 }}
{{- if and (kindIs "string" $value) (hasSuffix "%" $value) }}
{{- $percent := trimSuffix "%" $value | int }}
{{- div (add (mul $percent $replicas) 99) 100 }}
{{- else }}
{{- int $value }}
{{- end }}
{{- end }}

{{/*
The spool directory holds the spool and the quarantine file: both bounds must fit the volume, else
the kubelet evicts the pod (emptyDir sizeLimit) or writes fail (a full claim). $quarantine is the
collector's default quarantine_max_bytes (a test keeps it equal).
*/}}
{{- define "sparkwatch.validateSpool" -}}
{{- $quarantine := 268435456 }}
{{- with .Values.collector.config }}{{ with .quarantine_max_bytes }}{{ $quarantine = . }}{{ end }}{{ end }}
{{- $persistence := .Values.spool.persistence }}
{{- $sizeKey := ternary "spool.persistence.size" "spool.sizeLimit" $persistence.enabled }}
{{- $size := ternary $persistence.size .Values.spool.sizeLimit $persistence.enabled }}
{{- if not (and $persistence.enabled $persistence.existingClaim) }}
{{- $needed := addf (float64 .Values.spool.maxBytes) (float64 $quarantine) }}
{{- $bytes := include "sparkwatch.quantityBytes" $size | float64 }}
{{- if gt $needed $bytes }}
{{- fail (printf "spool.maxBytes (%s) plus the quarantine bound collector.config.quarantine_max_bytes (%s) exceed %s (%s): the spool directory would outgrow its volume" (include "sparkwatch.number" .Values.spool.maxBytes) (include "sparkwatch.number" $quarantine) $sizeKey $size) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Bytes of a Kubernetes quantity of the schema's form (digits, optional fraction and suffix). */}}
{{- define "sparkwatch.quantityBytes" -}}
{{- $quantity := toString . }}
{{- $number := regexFind "^[0-9]+(\\.[0-9]+)?" $quantity }}
{{- $suffix := trimPrefix $number $quantity }}
{{- $factors := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- printf "%.0f" (mulf (float64 $number) (get $factors $suffix)) }}
{{- end }}

{{/*
A value as the collector reads it: Helm holds every number of the values as a float64, whose
default text is 1.048576e+07 from a million up, which an integer setting refuses. Integral numbers
are written as integers; other values as they are.
*/}}
{{- define "sparkwatch.number" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) }}
{{- printf "%.0f" . }}
{{- else }}
{{- toString . }}
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

{{/* sha256 of every Secret the chart renders (an empty text for those it does not). */}}
{{- define "sparkwatch.secretsChecksum" -}}
{{- $texts := list }}
{{- range list "tokens" "read-token" "scrape-token" "tenant-read-tokens" "history" }}
{{- $texts = append $texts (include (printf "%s/secret-%s.yaml" $.Template.BasePath .) $) }}
{{- end }}
{{- join "\n---\n" $texts | sha256sum }}
{{- end }}
