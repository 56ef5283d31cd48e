{{/*
Names are fixed ("tasgate"), as the kustomize manifests name them: the webhook configurations and
the ClusterRole are cluster-scoped, so there is one tasgate per cluster, and the policy, probes,
NetworkPolicy and dashboards all say "tasgate".
*/}}

{{/* Labels on every object: kustomize's app.kubernetes.io/name plus Helm's own bookkeeping. */}}
{{- define "tasgate.labels" -}}
app.kubernetes.io/name: tasgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Service's DNS name: what the serving certificate names and the API server dials. */}}
{{- define "tasgate.serviceHost" -}}
tasgate.{{ .Release.Namespace }}.svc
{{- end -}}

{{/*
The image, refused while it is the placeholder: the webhooks fail closed (failurePolicy Fail), so
a release whose pods can never pull their image would refuse every gated CREATE in the cluster
from the moment it is installed. Failing here installs nothing at all.
*/}}
{{- define "tasgate.image" -}}
{{- $repo := .Values.image.repository | default "" -}}
{{- if or (not $repo) (hasPrefix "registry.example/" $repo) -}}
{{- fail (printf "image.repository is %q, a placeholder: tasgate publishes no image. Build it (make image), push it, and install with --set image.repository=<registry>/tasgate --set image.digest=sha256:<digest make image printed> (docs/install.md, \"The image\"). The chart refuses to render without it: its webhooks fail closed and would refuse every Job, JobSet and the other gated kinds while pods that cannot pull their image never start" $repo) -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) -}}
{{- fail (printf "image.digest must be sha256:<64 hex digits> (as `make image` prints it), not %q" .Values.image.digest) -}}
{{- end -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The policy file's text: .Values.policy, else the shipped default (files/policy.yaml, kept equal to
manifests/base/policy.yaml by tests/webhook/test_chart.py). Its kueueUsers must be .Values.kueueUsers:
the matchConditions and tasgate's own unsuspend check read one list. On the default policy the line
is rewritten when the value differs; a policy of your own that disagrees is refused.
*/}}
{{- define "tasgate.policy" -}}
{{- $default := .Files.Get "files/policy.yaml" -}}
{{- $text := .Values.policy | default $default -}}
{{- $parsed := fromYaml $text -}}
{{- if hasKey $parsed "Error" -}}
{{- fail (printf "policy does not parse as YAML: %s" $parsed.Error) -}}
{{- end -}}
{{- $spec := $parsed.spec | default dict -}}
{{- $have := $spec.kueueUsers | default ((fromYaml $default).spec.kueueUsers) -}}
{{- $want := .Values.kueueUsers -}}
{{- if deepEqual $have $want -}}
{{- $text -}}
{{- else if .Values.policy -}}
{{- fail (printf "policy.spec.kueueUsers %v differs from kueueUsers %v: the webhooks' matchConditions and tasgate's own check must name the same Kueue users; set both" $have $want) -}}
{{- else -}}
{{- $line := printf "  kueueUsers: %s" (toJson $want) -}}
{{- regexReplaceAll "(?m)^  kueueUsers: .*$" $text $line -}}
{{- end -}}
{{- end -}}

{{/* The CEL expression that lets Kueue's UPDATEs through without calling tasgate. */}}
{{- define "tasgate.kueueCondition" -}}
{{- range .Values.kueueUsers -}}
{{- if or (contains "'" .) (contains "\\" .) -}}
{{- fail (printf "kueueUsers entry %q: quotes and backslashes cannot go into the matchCondition" .) -}}
{{- end -}}
{{- end -}}
{{- $quoted := list -}}
{{- range .Values.kueueUsers -}}
{{- $quoted = append $quoted (printf "'%s'" .) -}}
{{- end -}}
request.operation != 'UPDATE' || !(request.userInfo.username in [{{ join ", " $quoted }}])
{{- end -}}
