{{/* The release's full name: the release name when it holds the chart name. */}}
{{- define "planner.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "planner.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: progress-planner
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "planner.selectorLabels" -}}
app.kubernetes.io/name: progress-planner
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "planner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "planner.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "planner.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The PlannerConfiguration (docs/controller.md): listeners and leader
election from the chart, then the policy and any other field from values. */}}
{{- define "planner.config" -}}
{{- if not (has .Values.mode (list "advise" "enforce")) -}}
{{- fail (printf "mode %q: want advise or enforce" .Values.mode) -}}
{{- end -}}
{{- $policy := merge (dict "mode" .Values.mode) (deepCopy .Values.policy) -}}
{{- with .Values.modeOverrides }}{{ $_ := set $policy "overrides" . }}{{ end -}}
{{- $base := dict
  "apiVersion" "planner.progress.io/v1alpha1"
  "kind" "PlannerConfiguration"
  "leaderElection" (dict "enabled" true "leaseName" (include "planner.fullname" .))
  "metrics" (dict "bindAddress" (printf ":%d" (int .Values.metrics.port)))
  "health" (dict "bindAddress" (printf ":%d" (int .Values.health.port)))
-}}
{{- if .Values.progressEndpoint.enabled -}}
{{- $pe := dict "serviceName" (printf "%s-progress" (include "planner.fullname" .)) "certSecretName" (printf "%s-progress-tls" (include "planner.fullname" .)) -}}
{{- if .Values.progressEndpoint.podWebhook.enabled -}}
{{- $_ := set $pe "podWebhook" (dict "configurationName" (printf "%s-pods" (include "planner.fullname" .))) -}}
{{- end -}}
{{- $_ := set $base "progressEndpoint" $pe -}}
{{- end -}}
{{- $cfg := mergeOverwrite $base (deepCopy .Values.config) (dict "policy" $policy) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* The fields both pod webhooks share (pod-webhook.yaml); their selectors differ. */}}
{{- define "planner.podWebhookCommon" -}}
clientConfig:
  service:
    name: {{ include "planner.fullname" . }}-progress
    namespace: {{ .Release.Namespace }}
    path: /mutate-v1-pod
    port: {{ .Values.progressEndpoint.podWebhook.port }}
rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["pods"]
    scope: Namespaced
failurePolicy: Ignore
sideEffects: None
timeoutSeconds: 5
reinvocationPolicy: IfNeeded
admissionReviewVersions: ["v1"]
{{- end }}
