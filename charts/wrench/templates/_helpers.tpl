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

{{/* The engine a pod gets: "dind", "hostSocket", or "none" for a pod
that runs no task (the API with api.slots 0). Call with (dict "root" $
"engine" <bool: the pod runs tasks>). */}}
{{- define "wrench.engineMode" -}}
{{- if .engine -}}{{ .root.Values.docker.mode }}{{- else -}}none{{- end -}}
{{- end -}}

{{/* The pod's data directory (WRENCH_DATA_DIR). With the node's engine each
pod works in its own directory under the host path, mounted at the same
path, so the engine finds workspaces where the pod put them. Call with
(dict "root" $ "mode" <engineMode>). */}}
{{- define "wrench.dataDir" -}}
{{- if eq .mode "hostSocket" -}}
{{- printf "%s/$(POD_NAME)" (trimSuffix "/" .root.Values.docker.hostSocket.hostDataDir) -}}
{{- else -}}
{{- .root.Values.dataDir -}}
{{- end -}}
{{- end -}}

{{/* Where the data volume is mounted (dict "root" $ "mode" <engineMode>). */}}
{{- define "wrench.dataMountPath" -}}
{{- if eq .mode "hostSocket" -}}
{{- .root.Values.docker.hostSocket.hostDataDir -}}
{{- else -}}
{{- .root.Values.dataDir -}}
{{- end -}}
{{- end -}}

{{/* Where the all-in-one queue's claim is mounted: the embedded NATS's store,
<data dir>/nats. With the node's engine the data directory is the
StatefulSet pod's own, <hostDataDir>/<fullname>-0. */}}
{{- define "wrench.queueMountPath" -}}
{{- if eq .Values.docker.mode "hostSocket" -}}
{{- printf "%s/%s-0/nats" (trimSuffix "/" .Values.docker.hostSocket.hostDataDir) (include "wrench.fullname" .) -}}
{{- else -}}
{{- printf "%s/nats" (trimSuffix "/" .Values.dataDir) -}}
{{- end -}}
{{- end -}}

{{- define "wrench.dockerHost" -}}
{{- if eq . "hostSocket" -}}
unix:///var/run/docker.sock
{{- else -}}
unix:///var/run/dind/docker.sock
{{- end -}}
{{- end -}}

{{/* The NATS URL workers and the scaled API join. */}}
{{- define "wrench.natsURL" -}}
{{- required "nats.url is required in scaled mode (the client URL of your NATS, e.g. nats://nats.nats.svc.cluster.local:4222)" .Values.nats.url -}}
{{- end -}}

{{/* Fails the render on values that cannot work together (values.schema.json,
which helm enforces first, checks each value on its own). */}}
{{- define "wrench.validate" -}}
{{- $_ := required "secrets.existingSecret is required: create a Secret holding the API token (and the LLM key) and name it here; the chart never takes secrets inline" .Values.secrets.existingSecret -}}
{{- if eq .Values.mode "scaled" -}}
{{- $_ := include "wrench.natsURL" . -}}
{{- if and .Values.nats.credsSecret .Values.nats.nkeySecret -}}
{{- fail "nats.credsSecret and nats.nkeySecret are two ways to sign in to NATS: give one" -}}
{{- end -}}
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

{{/* The all-in-one queue's PersistentVolumeClaim: the name the chart's
volumeClaimTemplate gave it up to 0.1.x, so such a claim carries over. */}}
{{- define "wrench.queueClaim" -}}
data-{{ include "wrench.fullname" . }}-0
{{- end -}}

{{/* Refuses a release that would stop using the queue's existing claim
(lookup sees the cluster on install and upgrade; `helm template` sees
nothing). */}}
{{- define "wrench.checkQueueClaim" -}}
{{- $name := include "wrench.queueClaim" . -}}
{{- $pvc := lookup "v1" "PersistentVolumeClaim" .Release.Namespace $name -}}
{{- if and $pvc (not .Values.allInOne.persistence.leaveBehind) -}}
{{- $owner := index ($pvc.metadata.annotations | default dict) "meta.helm.sh/release-name" | default "" -}}
{{- if or (eq $owner .Release.Name) (eq $owner "") -}}
{{- $why := ternary "mode: scaled keeps the queue in your NATS" "allInOne.persistence.enabled: false keeps the queue in the data directory" (eq .Values.mode "scaled") -}}
{{- fail (printf "the all-in-one queue's PersistentVolumeClaim %s (its queued tasks, states and results) would no longer be used: %s. Copy out what you still need (wrench list; wrench result ID --patch FILE), then upgrade with allInOne.persistence.leaveBehind=true: the claim is kept, and returning to allInOne with persistence mounts it again (delete it with kubectl -n %s delete pvc %s)" $name $why .Release.Namespace $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Refuses to upgrade a StatefulSet made by chart 0.1.x, whose
volumeClaimTemplate Kubernetes cannot change, and says how to move on. */}}
{{- define "wrench.checkStatefulSet" -}}
{{- $name := include "wrench.fullname" . -}}
{{- $sts := lookup "apps/v1" "StatefulSet" .Release.Namespace $name -}}
{{- if and $sts $sts.spec.volumeClaimTemplates -}}
{{- $pvc := include "wrench.queueClaim" . -}}
{{- $ns := .Release.Namespace -}}
{{- fail (printf "StatefulSet %s was made by chart 0.1.x with a volumeClaimTemplate, which Kubernetes cannot change. Once, before this upgrade: kubectl -n %s delete statefulset %s --cascade=orphan; kubectl -n %s annotate pvc %s meta.helm.sh/release-name=%s meta.helm.sh/release-namespace=%s; kubectl -n %s label pvc %s app.kubernetes.io/managed-by=Helm. The pod keeps running meanwhile, and the new StatefulSet mounts the same claim" $name $ns $name $ns $pvc .Release.Name $ns $ns $pvc) -}}
{{- end -}}
{{- end -}}

{{/* The Secret the NATS sign-in files come from in scaled mode, or "". */}}
{{- define "wrench.natsSecret" -}}
{{- if eq .Values.mode "scaled" -}}
{{- .Values.nats.credsSecret | default .Values.nats.nkeySecret -}}
{{- end -}}
{{- end -}}

{{/* The NATS sign-in flags of scaled-mode serve and worker: the Secret
named by nats.credsSecret or nats.nkeySecret is mounted at /etc/wrench/nats. */}}
{{- define "wrench.natsAuthArgs" -}}
{{- if .Values.nats.credsSecret }}
- --nats-creds=/etc/wrench/nats/{{ .Values.nats.credsKey }}
{{- else if .Values.nats.nkeySecret }}
- --nats-nkey=/etc/wrench/nats/{{ .Values.nats.nkeyKey }}
{{- with .Values.nats.caKey }}
- --nats-ca=/etc/wrench/nats/{{ . }}
{{- end }}
{{- end }}
{{- end -}}
