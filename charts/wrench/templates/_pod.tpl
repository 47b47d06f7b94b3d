{{/*
The pod template every wrench workload shares. Call it with
  (dict "root" $ "component" "server|api|worker" "args" "<name of a define
   that renders the container's args>" "portName" "http|metrics"
   "port" <number> "resources" <map> "pvc" <true when a volumeClaimTemplate
   provides the data volume> "dataSizeLimit" <emptyDir size otherwise>)

The pod has:
  - dind (docker.mode=dind): a native sidecar running dockerd, privileged,
    its socket in an emptyDir, group 1000 so the wrench user can use it;
  - bootstrap: an init container that waits for the engine, pulls Wrench's
    image and the sandbox image into it, and copies the wrench binary into
    the data directory. The engine bind-mounts that binary into every
    sandbox (the in-sandbox helper) and must find it at the path the wrench
    process has: the data directory is mounted at the same path in the pod
    and in the engine, and wrench runs from there;
  - wrench: the service, uid/gid 1000, no capabilities, read-only root.
*/}}
{{- define "wrench.pod" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $dind := eq $v.docker.mode "dind" -}}
metadata:
  labels:
    {{- include "wrench.componentSelectorLabels" (dict "root" $root "component" .component) | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $v.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "wrench.serviceAccountName" $root }}
  # Wrench never talks to the Kubernetes API.
  automountServiceAccountToken: false
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.runtimeClassName }}
  runtimeClassName: {{ . }}
  {{- end }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
    {{- if not $dind }}
    # The docker group of the nodes: the socket is root:docker 0660.
    supplementalGroups:
      - {{ $v.docker.hostSocket.socketGroup }}
    {{- end }}
  # Running tasks get --grace to finish, then are handed back; 30 s more
  # lets sandboxes be removed before the kubelet kills what is left.
  terminationGracePeriodSeconds: {{ add (int $v.wrench.graceSeconds) 30 }}
  initContainers:
    {{- if $dind }}
    - name: dind
      image: {{ $v.docker.image }}
      imagePullPolicy: IfNotPresent
      # A native sidecar: started before bootstrap and wrench, stopped after
      # them, so running sandboxes are cleaned up while the engine is alive.
      restartPolicy: Always
      args:
        - --host=unix:///var/run/dind/docker.sock
        - --group=1000
      env:
        - name: DOCKER_TLS_CERTDIR
          value: ""
      securityContext:
        # Docker-in-Docker needs a privileged container. It is root on the
        # node if escaped: see docs/operations.md, "Security model".
        privileged: true
        runAsNonRoot: false
        runAsUser: 0
        runAsGroup: 0
      startupProbe:
        exec:
          command: [docker, --host, unix:///var/run/dind/docker.sock, version]
        periodSeconds: 2
        failureThreshold: 90
      {{- with $v.docker.dind.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: dind-socket
          mountPath: /var/run/dind
        - name: dind-storage
          mountPath: /var/lib/docker
        - name: data
          mountPath: {{ include "wrench.dataMountPath" $root }}
    {{- end }}
    - name: bootstrap
      image: {{ $v.docker.image }}
      imagePullPolicy: IfNotPresent
      command: [sh, /etc/wrench/bootstrap.sh]
      env:
        {{- include "wrench.baseEnv" $root | nindent 8 }}
        - name: WRENCH_IMAGE
          value: {{ include "wrench.image" $root | quote }}
        - name: SANDBOX_IMAGE
          value: {{ $v.sandbox.image | quote }}
        - name: PULL
          value: {{ $v.docker.bootstrap.pull | quote }}
        - name: HOME
          value: /tmp
      securityContext:
        # Root only to create the data directory and give it to uid 1000.
        runAsNonRoot: false
        runAsUser: 0
        runAsGroup: 0
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: [ALL]
          add: [CHOWN]
      {{- with $v.docker.bootstrap.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        {{- include "wrench.commonMounts" $root | nindent 8 }}
        - name: bootstrap
          mountPath: /etc/wrench/bootstrap.sh
          subPath: bootstrap.sh
          readOnly: true
  containers:
    - name: wrench
      image: {{ include "wrench.image" $root }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      # The copy bootstrap made, at the path the engine also sees.
      command: ["$(WRENCH_DATA_DIR)/bin/wrench"]
      args:
        {{- include .args $root | nindent 8 }}
        {{- with $v.wrench.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        {{- include "wrench.baseEnv" $root | nindent 8 }}
        {{- include "wrench.secretEnv" (dict "root" $root "component" .component) | trim | nindent 8 }}
        {{- with $v.llm.baseURL }}
        - name: WRENCH_LLM_BASE_URL
          value: {{ . | quote }}
        {{- end }}
        {{- with $v.llm.model }}
        - name: WRENCH_LLM_MODEL
          value: {{ . | quote }}
        {{- end }}
        {{- with $v.wrench.otlpEndpoint }}
        - name: OTEL_EXPORTER_OTLP_ENDPOINT
          value: {{ . | quote }}
        {{- end }}
        {{- with $v.wrench.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: {{ .portName }}
          containerPort: {{ .port }}
          protocol: TCP
        {{- if and (eq .component "server") $v.allInOne.natsListen.enabled }}
        - name: nats
          containerPort: {{ $v.allInOne.natsListen.port }}
          protocol: TCP
        {{- end }}
      startupProbe:
        httpGet:
          path: /healthz
          port: {{ .portName }}
        periodSeconds: 2
        failureThreshold: 60
      livenessProbe:
        httpGet:
          path: /healthz
          port: {{ .portName }}
        periodSeconds: 20
        timeoutSeconds: 5
        failureThreshold: 3
      readinessProbe:
        httpGet:
          path: /readyz
          port: {{ .portName }}
        periodSeconds: 10
        timeoutSeconds: 5
      securityContext:
        {{- toYaml $v.securityContext | nindent 8 }}
      {{- with .resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        {{- include "wrench.commonMounts" $root | nindent 8 }}
        {{- if and (eq $v.mode "scaled") $v.nats.credsSecret }}
        - name: nats-creds
          mountPath: /etc/wrench/nats
          readOnly: true
        {{- end }}
  {{- with $v.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  volumes:
    {{- if not .pvc }}
    {{- include "wrench.dataVolume" (dict "root" $root "sizeLimit" .dataSizeLimit) | nindent 4 }}
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: 1Gi
    - name: bootstrap
      configMap:
        name: {{ include "wrench.fullname" $root }}-bootstrap
    {{- if $dind }}
    - name: dind-socket
      emptyDir: {}
    - name: dind-storage
      emptyDir:
        sizeLimit: {{ $v.docker.dind.storageSizeLimit }}
    {{- else }}
    - name: docker-socket
      hostPath:
        path: {{ $v.docker.hostSocket.path }}
        type: Socket
    {{- end }}
    {{- if and (eq $v.mode "scaled") $v.nats.credsSecret }}
    - name: nats-creds
      secret:
        secretName: {{ $v.nats.credsSecret }}
        defaultMode: 0440
    {{- end }}
{{- end -}}

{{/* Mounts of bootstrap and wrench: the data directory, /tmp, the engine. */}}
{{- define "wrench.commonMounts" -}}
- name: data
  mountPath: {{ include "wrench.dataMountPath" . }}
- name: tmp
  mountPath: /tmp
{{- if eq .Values.docker.mode "dind" }}
- name: dind-socket
  mountPath: /var/run/dind
{{- else }}
- name: docker-socket
  mountPath: /var/run/docker.sock
{{- end }}
{{- end -}}

{{/* Environment of bootstrap and wrench. POD_NAME comes first: the data
directory refers to it. */}}
{{- define "wrench.baseEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: WRENCH_DATA_DIR
  value: {{ include "wrench.dataDir" . | quote }}
- name: DOCKER_HOST
  value: {{ include "wrench.dockerHost" . }}
{{- end -}}

{{/* Secrets, referenced from the existing Secret, never inline. The API
token only goes to `wrench serve`, which checks it. */}}
{{- define "wrench.secretEnv" -}}
{{- $s := .root.Values.secrets -}}
{{- if and (ne .component "worker") $s.keys.apiToken }}
- name: WRENCH_API_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ $s.existingSecret }}
      key: {{ $s.keys.apiToken }}
{{- end }}
{{- if $s.keys.llmApiKey }}
- name: WRENCH_LLM_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ $s.existingSecret }}
      key: {{ $s.keys.llmApiKey }}
      optional: true
{{- end }}
{{- if $s.keys.gitToken }}
- name: WRENCH_GIT_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ $s.existingSecret }}
      key: {{ $s.keys.gitToken }}
{{- end }}
{{- end -}}

{{/* Flags `wrench serve` and `wrench worker` share. */}}
{{- define "wrench.serviceArgs" -}}
- --data-dir=$(WRENCH_DATA_DIR)
- --deployment={{ include "wrench.deploymentLabel" . }}
- --grace={{ int .Values.wrench.graceSeconds }}s
- --per-repo={{ int .Values.wrench.perRepo }}
- --warm={{ int .Values.wrench.warm }}
- --image={{ .Values.sandbox.image }}
- --network={{ .Values.wrench.network }}
- --verify={{ .Values.wrench.verify }}
- --log-level={{ .Values.wrench.logLevel }}
{{- end -}}

{{/* The pod's data volume when no volumeClaimTemplate provides it: the
node's directory (hostSocket) or an emptyDir of sizeLimit. */}}
{{- define "wrench.dataVolume" -}}
{{- $v := .root.Values -}}
- name: data
{{- if eq $v.docker.mode "hostSocket" }}
  hostPath:
    path: {{ $v.docker.hostSocket.hostDataDir }}
    type: DirectoryOrCreate
{{- else }}
  emptyDir:
    sizeLimit: {{ .sizeLimit }}
{{- end }}
{{- end -}}
