"""One module per `trainops` subcommand; see `trainops.cli`."""
