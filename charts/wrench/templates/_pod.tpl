{{/*
The pod template every wrench workload shares. Call it with
  (dict "root" $ "component" "server|api|worker" "args" "<name of a define
   that renders the container's args>" "portName" "http|metrics"
   "port" <number> "resources" <map> "queueClaim" <the all-in-one queue's
   PersistentVolumeClaim, or ""> "dataSizeLimit" <emptyDir size otherwise>
   "engine" <true when the pod runs tasks, so needs a Docker engine>)

A pod that runs no task (the scaled API with api.slots 0) has only the
wrench container, with an emptyDir data directory. Otherwise:

The pod has:
  - dind (docker.mode=dind): a native sidecar running dockerd, privileged,
    its socket in an emptyDir, group 1000 so the wrench user can use it;
  - bootstrap: an init container that waits for the engine, pulls the
    sandbox image into it with the pod's imagePullSecrets (never from
    Docker Hub by default), and gives the data directory to uid 1000;
  - wrench: the service, uid/gid 1000, no capabilities, read-only root. It
    copies its binary into the data directory at start: the engine
    bind-mounts that copy into every sandbox (the in-sandbox helper), so
    the data directory is mounted at the same path in the pod and in the
    engine, which wrench checks at start.
*/}}
{{- define "wrench.pod" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $mode := include "wrench.engineMode" (dict "root" $root "engine" .engine) -}}
{{- $dind := eq $mode "dind" -}}
{{- $hostSocket := eq $mode "hostSocket" -}}
{{- $env := dict "root" $root "mode" $mode -}}
metadata:
  labels:
    {{- include "wrench.componentSelectorLabels" (dict "root" $root "component" .component) | nindent 4 }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or $v.podAnnotations $v.wrench.policy }}
  annotations:
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $v.wrench.policy }}
    # A policy change rolls the pods (a mounted ConfigMap alone would
    # change under a running process, which reads it at start).
    checksum/policy: {{ . | sha256sum }}
    {{- end }}
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
    {{- if $hostSocket }}
    # The docker group of the nodes: the socket is root:docker 0660.
    supplementalGroups:
      - {{ $v.docker.hostSocket.socketGroup }}
    {{- end }}
  # Running tasks get --grace to finish, then are handed back; 30 s more
  # lets sandboxes be removed before the kubelet kills what is left.
  terminationGracePeriodSeconds: {{ add (int $v.wrench.graceSeconds) 30 }}
  {{- if .engine }}
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
          mountPath: {{ include "wrench.dataMountPath" $env }}
    {{- end }}
    - name: bootstrap
      image: {{ $v.docker.image }}
      imagePullPolicy: IfNotPresent
      command: [sh, /etc/wrench/bootstrap.sh]
      env:
        {{- include "wrench.baseEnv" $env | nindent 8 }}
        - name: SANDBOX_IMAGE
          value: {{ $v.sandbox.image | quote }}
        - name: PULL
          value: {{ $v.docker.bootstrap.pull | quote }}
        - name: HOME
          value: /tmp
        {{- if $v.imagePullSecrets }}
        - name: PULL_SECRETS
          value: /etc/wrench/pull-secrets
        {{- end }}
        {{- if and $hostSocket .queueClaim }}
        - name: QUEUE_DIR
          value: /var/run/wrench-queue
        {{- end }}
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
        {{- include "wrench.commonMounts" $env | nindent 8 }}
        - name: bootstrap
          mountPath: /etc/wrench/bootstrap.sh
          subPath: bootstrap.sh
          readOnly: true
        {{- range $i, $s := $v.imagePullSecrets }}
        - name: pull-secret-{{ $i }}
          mountPath: /etc/wrench/pull-secrets/{{ $i }}
          readOnly: true
        {{- end }}
        {{- if and $hostSocket .queueClaim }}
        # To give the queue's directory on the claim to wrench's user.
        - name: queue
          mountPath: /var/run/wrench-queue
        {{- end }}
  {{- end }}
  containers:
    - name: wrench
      image: {{ include "wrench.image" $root }}
      imagePullPolicy: {{ $v.image.pullPolicy }}
      args:
        {{- include .args $root | nindent 8 }}
        {{- with $v.wrench.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        {{- include "wrench.baseEnv" $env | nindent 8 }}
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
        {{- include "wrench.commonMounts" $env | nindent 8 }}
        {{- if and $hostSocket .queueClaim }}
        # The queue's store on the claim, inside the node's directory.
        - name: queue
          mountPath: {{ include "wrench.queueMountPath" $root }}
          subPath: nats
        {{- end }}
        {{- if include "wrench.natsSecret" $root }}
        - name: nats-creds
          mountPath: /etc/wrench/nats
          readOnly: true
        {{- end }}
        {{- if and (eq .component "server") $v.allInOne.natsListen.enabled $v.allInOne.natsListen.tlsSecret }}
        - name: nats-tls
          mountPath: /etc/wrench/nats-tls
          readOnly: true
        {{- end }}
        {{- if $v.wrench.policy }}
        - name: policy
          mountPath: /etc/wrench/policy
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
    {{- if and $dind .queueClaim }}
    - name: data
      persistentVolumeClaim:
        claimName: {{ .queueClaim }}
    {{- else }}
    {{- include "wrench.dataVolume" (dict "root" $root "mode" $mode "sizeLimit" .dataSizeLimit) | nindent 4 }}
    {{- end }}
    {{- if and $hostSocket .queueClaim }}
    - name: queue
      persistentVolumeClaim:
        claimName: {{ .queueClaim }}
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: 1Gi
    {{- if .engine }}
    - name: bootstrap
      configMap:
        name: {{ include "wrench.fullname" $root }}-bootstrap
    {{- range $i, $s := $v.imagePullSecrets }}
    # The pull secret as a Docker CLI config, for bootstrap's docker pull.
    - name: pull-secret-{{ $i }}
      secret:
        secretName: {{ $s.name }}
        items:
          - key: .dockerconfigjson
            path: config.json
    {{- end }}
    {{- end }}
    {{- if $dind }}
    - name: dind-socket
      emptyDir: {}
    - name: dind-storage
      emptyDir:
        sizeLimit: {{ $v.docker.dind.storageSizeLimit }}
    {{- else if $hostSocket }}
    - name: docker-socket
      hostPath:
        path: {{ $v.docker.hostSocket.path }}
        type: Socket
    {{- end }}
    {{- with include "wrench.natsSecret" $root }}
    - name: nats-creds
      secret:
        secretName: {{ . }}
        defaultMode: 0440
    {{- end }}
    {{- if and (eq .component "server") $v.allInOne.natsListen.enabled $v.allInOne.natsListen.tlsSecret }}
    - name: nats-tls
      secret:
        secretName: {{ $v.allInOne.natsListen.tlsSecret }}
        defaultMode: 0440
    {{- end }}
    {{- if $v.wrench.policy }}
    - name: policy
      configMap:
        name: {{ include "wrench.fullname" $root }}-policy
    {{- end }}
{{- end -}}

{{/* Mounts of bootstrap and wrench: the data directory, /tmp, the engine.
Call with (dict "root" $ "mode" <engineMode>). */}}
{{- define "wrench.commonMounts" -}}
- name: data
  mountPath: {{ include "wrench.dataMountPath" . }}
- name: tmp
  mountPath: /tmp
{{- if eq .mode "dind" }}
- name: dind-socket
  mountPath: /var/run/dind
{{- else if eq .mode "hostSocket" }}
- name: docker-socket
  mountPath: /var/run/docker.sock
{{- end }}
{{- end -}}

{{/* Environment of bootstrap and wrench. POD_NAME comes first: the data
directory refers to it. Call with (dict "root" $ "mode" <engineMode>). */}}
{{- define "wrench.baseEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: WRENCH_DATA_DIR
  value: {{ include "wrench.dataDir" . | quote }}
{{- if ne .mode "none" }}
- name: DOCKER_HOST
  value: {{ include "wrench.dockerHost" .mode }}
{{- end }}
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
{{- if .Values.wrench.policy }}
- --policy=/etc/wrench/policy/policy.yaml
{{- end }}
{{- end -}}

{{/* The pod's data volume when no volumeClaimTemplate provides it: the
node's directory (hostSocket) or an emptyDir of sizeLimit. */}}
{{- define "wrench.dataVolume" -}}
{{- $v := .root.Values -}}
- name: data
{{- if eq .mode "hostSocket" }}
  hostPath:
    path: {{ $v.docker.hostSocket.hostDataDir }}
    type: DirectoryOrCreate
{{- else }}
  emptyDir:
    sizeLimit: {{ .sizeLimit }}
{{- end }}
{{- end -}}
