"""The web dashboard: server-rendered pages over the GitOps API and the cluster."""
