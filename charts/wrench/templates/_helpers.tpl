{{/* Names, labels and checks shared by every template. */}}

{{- define "wrench.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name, at most 63 characters (a DNS label). */}}
{{- define "wrench.fullname" -}}
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

{{- define "wrench.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: name and instance only (immutable in Deployments). */}}
{{- define "wrench.selectorLabels" -}}
app.kubernetes.io/name: {{ include "wrench.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wrench.labels" -}}
helm.sh/chart: {{ include "wrench.chart" . }}
{{ include "wrench.selectorLabels" . }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: wrench
{{- end -}}

{{/* Labels of one component; call with (dict "root" $ "component" "worker"). */}}
{{- define "wrench.componentLabels" -}}
{{ include "wrench.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "wrench.componentSelectorLabels" -}}
{{ include "wrench.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The label of the Services the ServiceMonitor scrapes. */}}
{{- define "wrench.scrapeLabel" -}}
wrench.dev/metrics: "true"
{{- end -}}

{{- define "wrench.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "wrench.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "wrench.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The --deployment label of sandboxes and workspaces. */}}
{{- define "wrench.deploymentLabel" -}}
{{- default (include "wrench.fullname" .) .Values.wrench.deployment -}}
{{- end -}}

{{/* The pod's data directory (WRENCH_DATA_DIR). With the node's engine each
pod works in its own directory under the host path, mounted at the same
path, so the engine finds workspaces where the pod put them. */}}
{{- define "wrench.dataDir" -}}
{{- if eq .Values.docker.mode "hostSocket" -}}
{{- printf "%s/$(POD_NAME)" (trimSuffix "/" .Values.docker.hostSocket.hostDataDir) -}}
{{- else -}}
{{- .Values.dataDir -}}
{{- end -}}
{{- end -}}

{{/* Where the data volume is mounted. */}}
{{- define "wrench.dataMountPath" -}}
{{- if eq .Values.docker.mode "hostSocket" -}}
{{- .Values.docker.hostSocket.hostDataDir -}}
{{- else -}}
{{- .Values.dataDir -}}
{{- end -}}
{{- end -}}

{{- define "wrench.dockerHost" -}}
{{- if eq .Values.docker.mode "hostSocket" -}}
unix:///var/run/docker.sock
{{- else -}}
unix:///var/run/dind/docker.sock
{{- end -}}
{{- end -}}

{{/* The NATS URL workers and the scaled API join. */}}
{{- define "wrench.natsURL" -}}
{{- required "nats.url is required in scaled mode (the client URL of your NATS, e.g. nats://nats.nats.svc.cluster.local:4222)" .Values.nats.url -}}
{{- end -}}

{{/* Fails the render on values that cannot work. */}}
{{- define "wrench.validate" -}}
{{- if not (has .Values.mode (list "allInOne" "scaled")) -}}
{{- fail (printf "mode must be allInOne or scaled, not %q" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.docker.mode (list "dind" "hostSocket")) -}}
{{- fail (printf "docker.mode must be dind or hostSocket, not %q" .Values.docker.mode) -}}
{{- end -}}
{{- $_ := required "secrets.existingSecret is required: create a Secret holding the API token (and the LLM key) and name it here; the chart never takes secrets inline" .Values.secrets.existingSecret -}}
{{- if not (hasPrefix "/" .Values.dataDir) -}}
{{- fail "dataDir must be an absolute path" -}}
{{- end -}}
{{- if not (hasPrefix "/" .Values.docker.hostSocket.hostDataDir) -}}
{{- fail "docker.hostSocket.hostDataDir must be an absolute path" -}}
{{- end -}}
{{- if lt (int .Values.wrench.slots) 1 -}}
{{- fail "wrench.slots must be at least 1" -}}
{{- end -}}
{{- if eq .Values.mode "scaled" -}}
{{- $_ := include "wrench.natsURL" . -}}
{{- if and .Values.keda.enabled (not .Values.nats.monitoringEndpoint) -}}
{{- fail "keda.enabled needs nats.monitoringEndpoint (host:8222, the NATS HTTP monitoring port KEDA reads)" -}}
{{- end -}}
{{- if and .Values.api.enabled (not .Values.secrets.keys.apiToken) -}}
{{- fail "secrets.keys.apiToken is required: the API listens off loopback" -}}
{{- end -}}
{{- else -}}
{{- if not .Values.secrets.keys.apiToken -}}
{{- fail "secrets.keys.apiToken is required: the API listens off loopback" -}}
{{- end -}}
{{- end -}}
{{- end -}}
