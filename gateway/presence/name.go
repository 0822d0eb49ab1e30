package presence

import "regexp"

// nameRule is what a connector may call itself: a host-name label, so a
// name is safe in a URL path, a log line and a NATS subject alike.
var nameRule = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// ValidName reports whether name is a connector name the gateway accepts:
// 1 to 63 lower-case letters, digits and hyphens, starting and ending with
// a letter or digit. Every place that takes a name (connect, register,
// tokens, cluster messages, queries) checks it with this one rule.
func ValidName(name string) bool { return nameRule.MatchString(name) }
