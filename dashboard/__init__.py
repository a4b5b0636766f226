"""The web dashboard: server-rendered pages over the GitOps API and the cluster.

`install(app, hub=…, client=…)` mounts it on the GitOps API's application (`gitops.api.routes.
create_app`), so pages, assets and the API share one port, one set of rules for who may write
(`gitops.api.auth`) and one event stream. See docs/DASHBOARD.md.
"""

from __future__ import annotations

from dashboard.app import install

__all__ = ["install"]
