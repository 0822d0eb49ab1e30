// Package deploy holds no code: it is the home of the deployment files
// (Dockerfiles, docker-compose.yml's reverse proxy and PostgreSQL,
// Kubernetes manifests, the systemd unit, make demo's script) and of the
// tests that keep them true to the binaries and to each other — images
// built with the flags CI builds with, probes on real routes, arguments
// that are real flags, variables the code reads, selectors that select,
// Secrets the files say how to create, database URLs that name the
// database that runs, a data directory on a volume its user can write,
// and command lines in the operating docs that the binaries accept.
package deploy
