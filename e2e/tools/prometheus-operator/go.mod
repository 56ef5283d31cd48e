// Pin only, nothing is built: the Prometheus Operator module whose CRDs
// (example/prometheus-operator-crd/: ServiceMonitor, PrometheusRule) the e2e suite installs to
// server-side dry-run manifests/overlays/monitoring (e2e/prometheus_operator.py reads this file).
module tasgate.local/e2e/tools/prometheus-operator

go 1.26.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
