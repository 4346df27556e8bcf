{{/* Names and labels shared by the templates. */}}

{{- define "flotilla.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flotilla.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "flotilla.operatorName" -}}
{{- printf "%s-operator" (include "flotilla.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "flotilla.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flotilla.operatorName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flotilla.image" -}}
{{- if .Values.image.reference -}}
{{- .Values.image.reference -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "flotilla.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flotilla.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "flotilla.labels" -}}
{{ include "flotilla.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: flotilla
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}


{{/* "true" when a monitoring switch is on: true, or "auto" and the cluster serves the Prometheus
     Operator's API (monitoring.coreos.com/v1); "" otherwise. Call with (list <value> $). */}}
{{- define "flotilla.monitoringOn" -}}
{{- $value := index . 0 -}}
{{- $root := index . 1 -}}
{{- if eq (toString $value) "auto" -}}
{{- if $root.Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- else if eq (toString $value) "true" -}}
true
{{- end -}}
{{- end -}}

{{/* The namespaces the operator manages, as a JSON list: watchNamespaces, or the release's own
     namespace (Strimzi's default too); not used with watchAllNamespaces. */}}
{{- define "flotilla.watchedNamespaces" -}}
{{- if and .Values.watchAllNamespaces .Values.watchNamespaces -}}
{{- fail "watchAllNamespaces: true manages every namespace; leave watchNamespaces empty" -}}
{{- end -}}
{{- default (list .Release.Namespace) .Values.watchNamespaces | toJson -}}
{{- end -}}
