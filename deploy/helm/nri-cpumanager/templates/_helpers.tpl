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

{{/*
The host files the node's checks read (the plugin's at its start, and
nri-cpumanager doctor run in its pod), each mounted read-only under /host
where it is on the host (doctor.*): the kubelet's configuration file and
drop-in directory, containerd's configuration (and conf.d); on k3s and
RKE2 their config.yaml and config.yaml.d, their kubelet's drop-in
directory and their containerd's configuration. A YAML list of name,
path and dir (a directory).
*/}}
{{- define "nri-cpumanager.hostFiles" -}}
{{- $d := .Values.doctor -}}
{{- if $d.enabled -}}
{{- if not $d.distribution -}}
- {name: host-kubelet-config, path: {{ $d.kubeletConfig | default "/var/lib/kubelet/config.yaml" | quote }}}
- {name: host-kubelet-dropins, path: {{ $d.kubeletConfigDir | default "/etc/kubernetes/kubelet.conf.d" | quote }}, dir: true}
- {name: host-containerd-config, path: /etc/containerd/config.toml}
- {name: host-containerd-dropins, path: /etc/containerd/conf.d, dir: true}
{{- else -}}
{{- $data := printf "/var/lib/rancher/%s" $d.distribution -}}
- {name: host-rancher-config, path: /etc/rancher/{{ $d.distribution }}/config.yaml}
- {name: host-rancher-dropins, path: /etc/rancher/{{ $d.distribution }}/config.yaml.d, dir: true}
{{- with $d.kubeletConfig }}
- {name: host-kubelet-config, path: {{ . | quote }}}
{{- end }}
- {name: host-kubelet-dropins, path: {{ $d.kubeletConfigDir | default (printf "%s/agent/etc/kubelet.conf.d" $data) | quote }}, dir: true}
- {name: host-containerd-config, path: {{ printf "%s/agent/etc/containerd/config.toml" $data | quote }}}
{{- end -}}
{{- end -}}
{{- end -}}
