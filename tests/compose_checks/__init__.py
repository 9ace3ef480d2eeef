"""The checks of tests/compose_test.py (which runs them), one concept a
module:

  common.py           paths and limits, the PASS/FAIL tally, running a command
  docker_host.py      Docker on this machine: installing it, the CLI and
                      compose command, a dockerd of the test's own that
                      restores the host's network state, the images' tags
  images.py           building deploy/'s images and what they hold; the
                      standalone run, the CUDA and Python images
  cluster.py          the compose cluster: its plumbing and the runs (sync,
                      async, killed worker, killed server, Python workers)
  running_cluster.py  the monitoring and security checks of a cluster whose
                      servers are up
"""
