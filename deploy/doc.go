// Package deploy holds no code: it is the home of the deployment files
// (Dockerfiles, docker-compose.yml's reverse proxy, Kubernetes manifests,
// the systemd unit) and of the tests that keep them true to the binaries —
// images built with the flags CI builds with, probes on real routes,
// arguments that are real flags, selectors that select.
package deploy
