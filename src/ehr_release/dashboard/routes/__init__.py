"""The dashboard's routes, one router per job: sign-in, runs and decisions, documents, audit."""
