"""The GitOps engine: every decision a round makes, as pure functions over plain data.

It owns what a manifest is (`manifests`, `entries`, `kinds`), how much one revision may hold
(`limits`: files, documents, objects, bytes, depth), whether a job may be applied
(`preflight`, the webhook's own rules) and where a repository may reach (`tenancy`, `urls`);
how desired objects pair with live ones (`pairing`), whether they differ (`diff`, `handheld`,
`compare`), how healthy they are (`health`), in which order to apply and prune them (`order`),
what must never be destroyed (`guards`, `ownership`), and what the JobRepository's status says
(`status`, `report`, `triggers`, `records`). No module here reads a file, a socket, a clock or
the cluster: callers pass `now` and the objects; import-linter forbids the rest.
"""
