"""The vocabulary every layer shares: `ResourceInfo`, the served-resource registry, Status and
field errors as kube-apiserver words them, YAML decoding. Imports nothing of localcluster."""
