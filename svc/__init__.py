"""The `svc` command: the composition root. Its sub-commands read the configuration, build the API (`api/`) and
the jobs process (`jobs/`) over the domain (`domain/`), and run the stand-alone clients (`clients/`). Nothing of
the service imports it."""
