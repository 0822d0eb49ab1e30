package cli

import (
	"os"
	"testing"

	"github.com/uncaged/workflow/shared/envflag"
)

// connect takes the gateway credential out of its environment once read,
// so the threads, agents and shell commands it starts do not inherit it.
func TestConnectorTokenLeavesNoCredentialInTheEnvironment(t *testing.T) {
	for _, env := range []string{EnvToken, EnvSharedSecret} {
		t.Setenv(EnvToken, "")
		t.Setenv(EnvSharedSecret, "")
		t.Setenv(env, "credential-"+env)
		a := &app{env: Env{Getenv: os.Getenv}}
		cmd := a.connectCmd()
		if err := envflag.Apply(cmd.Flags(), os.Getenv); err != nil {
			t.Fatal(err)
		}
		token, _ := cmd.Flags().GetString("token")
		tok, err := a.connectorToken(token, "")
		if err != nil || tok != "credential-"+env {
			t.Fatalf("%s: token %q, %v", env, tok, err)
		}
		if v, ok := os.LookupEnv(env); ok {
			t.Fatalf("%s is still in the environment: %q", env, v)
		}
	}
}
