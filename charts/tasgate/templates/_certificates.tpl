{{/*
The serving certificate, per certificates.mode. Rendered once per release render
("tasgate.certs" caches its result on the root context), since the Secret and both webhooks'
caBundle must hold the same CA.
*/}}

{{- define "tasgate.dnsNames" -}}
{{- $host := include "tasgate.serviceHost" . -}}
{{- list $host (printf "%s.cluster.local" $host) | toJson -}}
{{- end -}}

{{/*
self-signed: a CA and serving pair (ECDSA P-256, as `tasgate certs` makes them). An existing
tasgate-tls Secret that this chart made for the same DNS names is kept (lookup: on upgrade the CA
and caBundle stay put); `helm template` has no cluster, so it always generates.
*/}}
{{- define "tasgate.selfSigned" -}}
{{- $names := include "tasgate.dnsNames" . -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace "tasgate-tls" | default dict -}}
{{- $data := $existing.data | default dict -}}
{{- $notes := ($existing.metadata | default dict).annotations | default dict -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") (eq (index $notes "tasgate.io/dns-names" | default "") $names) -}}
caCrt: {{ index $data "ca.crt" }}
tlsCrt: {{ index $data "tls.crt" }}
tlsKey: {{ index $data "tls.key" }}
{{- else -}}
{{- $days := int .Values.certificates.days -}}
{{- $ca := genCAWithKey "tasgate webhook CA" $days (genPrivateKey "ecdsa") -}}
{{- $cert := genSignedCertWithKey (include "tasgate.serviceHost" .) nil (fromJsonArray $names) $days $ca (genPrivateKey "ecdsa") -}}
caCrt: {{ $ca.Cert | b64enc }}
tlsCrt: {{ $cert.Cert | b64enc }}
tlsKey: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}

{{/* {caCrt, tlsCrt, tlsKey} base64-encoded ("" where the mode has none), computed once. */}}
{{- define "tasgate.certs" -}}
{{- if not (hasKey .Values "__tasgateCerts") -}}
{{- $mode := .Values.certificates.mode -}}
{{- $certs := dict "caCrt" "" "tlsCrt" "" "tlsKey" "" -}}
{{- if eq $mode "self-signed" -}}
{{- $certs = include "tasgate.selfSigned" . | fromYaml -}}
{{- else if eq $mode "provided" -}}
{{- $c := .Values.certificates -}}
{{- if ne (empty $c.tlsCrt) (empty $c.tlsKey) -}}
{{- fail "certificates.tlsCrt and certificates.tlsKey go together (both, or neither to keep your own tasgate-tls Secret)" -}}
{{- end -}}
{{- if and .Values.webhooks.enabled (empty $c.caCrt) -}}
{{- fail "certificates.mode=provided needs certificates.caCrt (the CA the API server trusts; e.g. --set-file certificates.caCrt=certs/ca.crt), or webhooks.enabled=false" -}}
{{- end -}}
{{- $certs = dict "caCrt" ($c.caCrt | b64enc) "tlsCrt" ($c.tlsCrt | b64enc) "tlsKey" ($c.tlsKey | b64enc) -}}
{{- if empty $c.caCrt -}}{{- $_ := set $certs "caCrt" "" -}}{{- end -}}
{{- if empty $c.tlsCrt -}}{{- $_ := set $certs "tlsCrt" "" -}}{{- $_ := set $certs "tlsKey" "" -}}{{- end -}}
{{- else if ne $mode "cert-manager" -}}
{{- fail (printf "certificates.mode must be self-signed, cert-manager or provided, not %q" $mode) -}}
{{- end -}}
{{- $_ := set .Values "__tasgateCerts" $certs -}}
{{- end -}}
{{- toYaml (index .Values "__tasgateCerts") -}}
{{- end -}}

{{/* clientConfig.caBundle, unless cert-manager injects it. */}}
{{- define "tasgate.caBundle" -}}
{{- $ca := (include "tasgate.certs" . | fromYaml).caCrt -}}
{{- if $ca -}}
caBundle: {{ $ca }}
{{- end -}}
{{- end -}}

{{- define "tasgate.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/tasgate
{{- end -}}
{{- end -}}
