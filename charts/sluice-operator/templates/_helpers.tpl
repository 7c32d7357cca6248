{{- define "sluice-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sluice-operator.labels" -}}
app.kubernetes.io/name: sluice-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "sluice-operator.selector" -}}
app.kubernetes.io/name: sluice-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The selector labels as key=value,... (keep in step with the selector above). */}}
{{- define "sluice-operator.selectorPairs" -}}
app.kubernetes.io/name=sluice-operator,app.kubernetes.io/instance={{ .Release.Name }}
{{- end -}}

{{- define "sluice-operator.serviceAccount" -}}
{{- default (include "sluice-operator.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The namespaces the operator manages: the configured list, or the release namespace. */}}
{{- define "sluice-operator.namespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- join "," .Values.watchNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* Rules the operator needs wherever it manages jobs. */}}
{{- define "sluice-operator.rules" -}}
- apiGroups: [sluice.dev]
  resources: [streamjobs, savepoints]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [sluice.dev]
  resources: [streamjobs/status, savepoints/status]
  verbs: [get, update, patch]
# Coordinator pods, their service and config map; also what Spark drivers get through the per-job Role,
# which the operator can only grant because it holds the same rights.
- apiGroups: [""]
  resources: [pods, services, configmaps, persistentvolumeclaims]
  verbs: [get, list, watch, create, update, patch, delete, deletecollection]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, delete]
# Secrets: storage credentials named by spec.storageSecret (read, to read checkpoints and job results),
# each job's own Secret with its REST token and Spark secret (created once, read for the REST calls,
# deleted with the job), and the namespace's state key `sluice-state-key` (created once, never replaced
# or deleted). `get` reads any Secret of the namespace: see docs/operator.md.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, delete]
{{- if .Values.networkPolicy.enabled }}
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, update, delete]
{{- end }}
{{- if .Values.metrics.jobs.podMonitor.enabled }}
# A PodMonitor per job (prometheus-operator), deleted with the job.
- apiGroups: [monitoring.coreos.com]
  resources: [podmonitors]
  verbs: [get, create, patch, delete]
{{- end }}
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [get, list, watch, patch]
{{- end -}}

{{- define "sluice-operator.driverRules" -}}
- apiGroups: [""]
  resources: [pods, services, configmaps, persistentvolumeclaims]
  verbs: [get, list, watch, create, update, patch, delete, deletecollection]
{{- end -}}

{{/* A map of labels as key=value,... (sorted by key, as range gives them). */}}
{{- define "sluice-operator.pairs" -}}
{{- $pairs := list -}}
{{- range $key, $value := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $key $value) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}
