{{/*
The name of the chart's objects: the release name when it contains the
chart's name (helm install nri-cpumanager ... gives the same names as
deploy/'s kustomization), else <release>-<chart>.
*/}}
{{- define "nri-cpumanager.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nri-cpumanager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of every object, and of the pods (the DaemonSet's selector). The
same as deploy/'s, so both install the same DaemonSet.
*/}}
{{- define "nri-cpumanager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nri-cpumanager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nri-cpumanager.labels" -}}
{{ include "nri-cpumanager.selectorLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The port of config.metricsAddress ("" when metrics are off).
*/}}
{{- define "nri-cpumanager.metricsPort" -}}
{{- with .Values.config.metricsAddress -}}
{{- splitList ":" . | last -}}
{{- end -}}
{{- end -}}

{{- define "nri-cpumanager.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}
