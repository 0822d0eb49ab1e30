package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/storage"
)

// serviceCLI is a CLI with a temporary HOME, a token file and a fake
// binary to point the unit at.
type serviceCLI struct {
	*cli
	home, token, binary string
}

func newServiceCLI(t *testing.T) serviceCLI {
	c := newCLI(t)
	home := t.TempDir()
	c.env["HOME"] = home
	delete(c.env, storage.EnvRoot)
	token := filepath.Join(home, "laptop token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(home, "bin", "uncaged-workflow")
	if err := os.MkdirAll(filepath.Dir(binary), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(binary, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return serviceCLI{cli: c, home: home, token: token, binary: binary}
}

func (s serviceCLI) install(extra ...string) []string {
	return append([]string{"service", "install", "--name", "laptop", "--gateway", "https://gw.example.com", "--token-file", s.token, "--binary", s.binary}, extra...)
}

func (s serviceCLI) unitPath() string {
	return filepath.Join(s.home, ".config", "systemd", "user", ServiceUnitName)
}

func TestServiceInstallWritesAUserUnit(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	out := s.ok(s.install()...)
	if !strings.Contains(out, "wrote "+s.unitPath()) || !strings.Contains(out, "systemctl --user daemon-reload && systemctl --user enable --now uncaged-workflow-connect\n") {
		t.Fatalf("output:\n%s", out)
	}
	b, err := os.ReadFile(s.unitPath())
	if err != nil {
		t.Fatal(err)
	}
	unit := string(b)
	for _, want := range []string{
		"\n[Service]\n",
		"\nExecStart=" + s.binary + ` connect --name laptop --gateway https://gw.example.com --token-file "` + s.token + `"` + "\n",
		"\nRestart=always\n",
		// connect's exit codes for what retrying cannot fix.
		"\nRestartPreventExitStatus=10 11 12 13 14 15 16\n",
		// Stopping the service leaves the engine host and its threads.
		"\nKillMode=process\n",
		"\nStartLimitIntervalSec=0\n",
		"\n[Install]\nWantedBy=default.target\n",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	if strings.Contains(unit, "Environment=") {
		t.Errorf("no storage root was chosen, yet the unit sets one:\n%s", unit)
	}

	// The same install again changes nothing and says so.
	if out := s.ok(s.install()...); !strings.Contains(out, "is up to date") {
		t.Fatalf("second install:\n%s", out)
	}
}

func TestServiceInstallDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	out := s.ok(s.install("--dry-run")...)
	if !strings.HasPrefix(out, "# uncaged-workflow connect as a systemd user service") || !strings.Contains(out, "ExecStart=") {
		t.Fatalf("dry run printed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(s.home, ".config")); !os.IsNotExist(err) {
		t.Fatalf("dry run wrote something: %v", err)
	}
}

func TestServiceInstallHonoursXDGConfigHome(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	xdg := filepath.Join(s.home, "xdg")
	s.env["XDG_CONFIG_HOME"] = xdg
	s.ok(s.install()...)
	if _, err := os.Stat(filepath.Join(xdg, "systemd", "user", ServiceUnitName)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.unitPath()); !os.IsNotExist(err) {
		t.Fatalf("also wrote under HOME: %v", err)
	}
}

func TestServiceInstallKeepsADifferentUnitWithoutForce(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	if err := os.MkdirAll(filepath.Dir(s.unitPath()), 0o755); err != nil {
		t.Fatal(err)
	}
	mine := "[Service]\nExecStart=/my/own\n"
	if err := os.WriteFile(s.unitPath(), []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	s.fails("exists with other contents; pass --force", s.install()...)
	if b, _ := os.ReadFile(s.unitPath()); string(b) != mine {
		t.Fatalf("unit changed without --force:\n%s", b)
	}
	s.ok(s.install("--force")...)
	if b, _ := os.ReadFile(s.unitPath()); !strings.Contains(string(b), "connect --name laptop") {
		t.Fatalf("--force did not replace the unit:\n%s", b)
	}
}

func TestServiceInstallBakesInAChosenStorageRoot(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	// Environment= expands no variables: a "$" is written as it is.
	s.env[storage.EnvRoot] = filepath.Join(s.home, "store 100% $5")
	unit := s.ok(s.install("--dry-run")...)
	if want := "\nEnvironment=\"" + storage.EnvRoot + "=" + s.home + "/store 100%% $5\"\n"; !strings.Contains(unit, want) {
		t.Fatalf("unit lacks %q:\n%s", want, unit)
	}
}

func TestServiceInstallRejectsBadInputAndWritesNothing(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	empty := filepath.Join(s.home, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	base := func(name, gateway, token string) []string {
		return []string{"service", "install", "--name", name, "--gateway", gateway, "--token-file", token, "--binary", s.binary}
	}
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"requires --gateway", []string{"service", "install", "--token-file", s.token}},
		{"requires --token-file", []string{"service", "install", "--gateway", "https://gw.example.com", "--name", "laptop"}},
		{`unsupported scheme "ftp"`, base("laptop", "ftp://gw.example.com", s.token)},
		{"has no scheme: write https://gw.example.com", base("laptop", "gw.example.com", s.token)},
		{"no host", base("laptop", "https://", s.token)},
		{"invalid connector name", base("Laptop_1", "https://gw.example.com", s.token)},
		{"invalid connector name", base("-laptop", "https://gw.example.com", s.token)},
		{"token file: ", base("laptop", "https://gw.example.com", filepath.Join(s.home, "missing"))},
		{"is not a regular file", base("laptop", "https://gw.example.com", s.home)},
		{"is empty", base("laptop", "https://gw.example.com", empty)},
		{"is not an executable file", append(base("laptop", "https://gw.example.com", s.token), "--binary", s.token)},
		{"control character", base("laptop", "https://gw.example.com/a\nb", s.token)},
		{"takes no arguments", append(s.install(), "extra")},
	} {
		s.fails(tc.want, tc.args...)
	}
	if _, err := os.Stat(filepath.Join(s.home, ".config")); !os.IsNotExist(err) {
		t.Fatalf("a refused install wrote something: %v", err)
	}
}

func TestServiceInstallWarnsAboutAReadableToken(t *testing.T) {
	t.Parallel()
	s := newServiceCLI(t)
	if err := os.Chmod(s.token, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := s.run(s.install("--dry-run")...)
	if code != 0 || !strings.Contains(errs, "readable by other users; chmod 600") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

func TestSystemdQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":           "plain",
		"/a b/c":          `"/a b/c"`,
		"100%":            "100%%",
		"$HOME":           "$$HOME",
		`say "hi"`:        `"say \"hi\""`,
		`back\slash`:      `"back\\slash"`,
		"":                `""`,
		"https://x/?a=b;": `"https://x/?a=b;"`,
	} {
		if got, err := systemdQuote(in); err != nil || got != want {
			t.Errorf("systemdQuote(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := systemdQuote("a\nb"); err == nil {
		t.Error("newline accepted")
	}
}
