package agents

// newCommandAgent returns the cli, cursor, hermes or exec agent for spec.
// TODO(helper-commands): replaced by the real implementation.
func newCommandAgent(spec Spec) (Agent, error) { return stubAgent{spec.Kind}, nil }
