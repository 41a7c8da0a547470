"""The job on Kubernetes: PS and worker pods behind the master's `InstanceManager` interface.

* `pod_states`: pure logic; what a pod's watch events mean (a declarative transition table),
  and the backoff for refused pod creations.
* `manifests`: pure builders of the pods, Services and ConfigMap the manager creates, and the
  parsers of their flags.
* `manager`: `KubernetesInstanceManager`, the API layer (official `kubernetes` client).
* `options`: the master's Kubernetes flags and `make_instance_manager`.
"""
