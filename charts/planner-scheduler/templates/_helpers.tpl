{{- define "scheduler.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: planner-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "scheduler.selectorLabels" -}}
app.kubernetes.io/name: planner-scheduler
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
