// Package docs holds no code: it is the home of the repository's
// documentation (architecture.md, compatibility.md, configuration.md,
// operations.md, reliability.md), and its tests check that documentation against the
// code, so a reader who trusts it is not misled.
package docs
