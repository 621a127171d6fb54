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

{{/*
The recommended labels of the pods: the selector's, and those that say
what runs (deploy/'s kustomization sets the same, managed-by aside).
*/}}
{{- define "nri-cpumanager.podLabels" -}}
{{ include "nri-cpumanager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | quote }}
app.kubernetes.io/component: plugin
app.kubernetes.io/part-of: nri-cpumanager
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "nri-cpumanager.labels" -}}
{{ include "nri-cpumanager.podLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The pod's priority class: priorityClassName when set, else
system-node-critical in kube-system and none elsewhere (clusters that
limit the critical classes to kube-system refuse it there, unless a quota
admits it: see resourcequota.yaml).
*/}}
{{- define "nri-cpumanager.priorityClassName" -}}
{{- if .Values.priorityClassName -}}
{{ .Values.priorityClassName }}
{{- else if eq .Release.Namespace "kube-system" -}}
system-node-critical
{{- end -}}
{{- end -}}

{{/*
The port of config.metricsAddress ("" when metrics are off).
*/}}
{{- define "nri-cpumanager.metricsPort" -}}
{{- with .Values.config.metricsAddress -}}
{{- splitList ":" . | last -}}
{{- end -}}
{{- end -}}

{{/* The port of config.healthAddress ("" when it is off). */}}
{{- define "nri-cpumanager.healthPort" -}}
{{- with .Values.config.healthAddress -}}
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
