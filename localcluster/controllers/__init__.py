"""Controllers. In-process, on the server's state: the manager's loop driving the garbage
collector, namespace finalization, the default ServiceAccount and event expiry. Over HTTP,
beside the kubelet: the scheduler and the Deployment controller (through `client`)."""
