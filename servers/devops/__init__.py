"""The ``devops`` server: linters, CI reports, Kubernetes, Docker engine, config files, releases and schedules."""
