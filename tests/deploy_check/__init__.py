"""The checks of tests/deploy_config_check.py (which runs them), one concept a
module:

  binaries.py           the binaries' flags; a command line against its binary
  security.py           TLS flags and certificate files; no committed keys
  compose.py            docker-compose.yml: variables, merge, services
  compose_overrides.py  the compose files together: the GPU, Python and
                        unix-socket overrides, in every environment
  k8s.py                the kustomizations as kubectl renders them
  k8s_security.py       the pods' securityContext, Secrets, NetworkPolicy,
                        the admin pod
  dockerfiles.py        the Dockerfiles, .dockerignore, runtime packages
  checks.py             check_all and the self-check's mutations
"""
