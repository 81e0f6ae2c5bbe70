{{/* The name of every object: the release name, or release-chute. */}}
{{- define "chute.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The headless Service: pod DNS names and the --join seed. */}}
{{- define "chute.headless" -}}
{{- printf "%s-headless" (include "chute.fullname" .) -}}
{{- end -}}

{{/* Labels that select the pods; they never change after install. */}}
{{- define "chute.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "chute.labels" -}}
{{ include "chute.selectorLabels" . }}
app.kubernetes.io/part-of: chute
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "chute.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{/*
GOMEMLIMIT in bytes: goMemLimitPercent of resources.limits.memory, a
Kubernetes quantity (1Gi, 1536Mi, 2G, 1073741824). Empty without a limit.
*/}}
{{- define "chute.goMemLimit" -}}
{{- $limit := dig "limits" "memory" "" (.Values.resources | default dict) -}}
{{- if $limit -}}
{{- $q := toString $limit -}}
{{- if kindIs "float64" $limit -}}{{- $q = printf "%.0f" $limit -}}{{- end -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $suffix := trimPrefix $num $q -}}
{{- $units := dict "" 1 "k" 1000 "M" 1000000 "G" 1000000000 "T" 1000000000000 "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "Ti" 1099511627776 -}}
{{- if or (not $num) (not (hasKey $units $suffix)) -}}
{{- fail (printf "resources.limits.memory %q: want a number with k, M, G, T, Ki, Mi, Gi or Ti" $q) -}}
{{- end -}}
{{- $pct := .Values.goMemLimitPercent | int -}}
{{- if or (lt $pct 1) (gt $pct 100) -}}
{{- fail (printf "goMemLimitPercent %v: want 1 to 100" .Values.goMemLimitPercent) -}}
{{- end -}}
{{- divf (mulf (float64 $num) (get $units $suffix) $pct) 100 | floor | int64 -}}
{{- end -}}
{{- end -}}
