"""The GitOps HTTP API: `/api/v1/…`, the push hook, logins and the live stream.

It owns the routes (`routes`), who a caller is and what they may see and do (`rules`, pure;
`access`, its shell; `reviews`, TokenReview and SubjectAccessReview; `auth`), what is shown of
an object (`show`), the change stream (`stream`), where `trainops up`'s API listens
(`address`) and what the modules share (`state`). It reads the runtime only through
`gitops.runtime.hub.Hub`; the dashboard mounts on it.
"""
