"""What the node side shares: the `Kube` facade over the client runtime, API time formats and
pod Event builders. The kubelet, the scheduler and the Deployment controller reach the API server
through here only."""
