"""The reviewer dashboard: a small FastAPI app over the same database the CLI uses."""
