"""End-to-end harness: a real kube-apiserver + etcd on loopback, driven with a real kubectl."""
