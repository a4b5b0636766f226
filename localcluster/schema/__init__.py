"""Schemas: OpenAPI documents, CRD structural schemas and their validation, CEL rules, the
schema cursor patching walks with. Pure; no storage, no HTTP."""
