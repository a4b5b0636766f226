"""Differential fidelity: the same kubectl workflows against the embedded server and a real
kube-apiserver, outputs normalized and compared (issue #12, item 6)."""
