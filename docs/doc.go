// Package docs holds no code: it is the home of the repository's
// documentation beyond the README (architecture.md, cli.md,
// compatibility.md, configuration.md, deploy.md, gateway.md,
// operations.md, performance.md, reliability.md, storage.md,
// workflows.md), and its tests check that documentation against the code
// (the layout against the packages, the compatibility table against the
// tests, every link against the files and headings, the README's length),
// so a reader who trusts it is not misled.
package docs
