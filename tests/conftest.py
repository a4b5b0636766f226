"""Root conftest: registers the shared fixtures (`cluster`, `namespace`) for every test folder."""

pytest_plugins = ["tests.support.cluster"]
