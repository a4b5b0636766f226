"""trainops: admission control and GitOps for T9k training jobs. This package only wires parts."""

__version__ = "0.1.0"
