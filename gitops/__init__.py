"""gitops package."""
