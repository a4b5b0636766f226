"""Root conftest: registers the shared fixtures (`cluster`, `namespace`) and the `embedded_only`
marker's skip for every test folder."""

pytest_plugins = [
    "tests.support.cluster",
    "tests.support.embedded_only",
    "tests.support.ci_skips",
]
