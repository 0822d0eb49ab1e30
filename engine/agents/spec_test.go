package agents

import (
	"strings"
	"testing"
)

func TestParseSpec(t *testing.T) {
	t.Parallel()
	good := []string{
		`{"type":"llm","model":"default"}`,
		`{"type":"react","model":"openai/gpt-4o","workspace":"/tmp/w","tools":["read_file"],"maxRounds":8}`,
		`{"type":"cli","command":"/usr/bin/claude","args":["-p","{prompt}"],"timeout":1000}`,
		`{"type":"cursor"}`,
		`{"type":"exec","command":"./role.sh","env":{"A":"b"}}`,
		`{"type":"workflow","workflow":"develop"}`,
	}
	for _, in := range good {
		if _, err := ParseSpec([]byte(in)); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	bad := map[string]string{
		`{}`:                           "type is required",
		`{"type":"gpt"}`:               `unknown type "gpt"`,
		`{"type":"llm","command":"x"}`: "command does not apply to a llm agent",
		`{"type":"cli"}`:               "needs a command",
		`{"type":"workflow"}`:          "needs the workflow's name",
		`{"type":"exec","command":"x","timeout":-1}`: "timeout must be >= 0",
		`{"type":"llm","modle":"x"}`:                 "unknown field",
		`{"type":"llm"} {}`:                          "trailing data",
		`[1]`:                                        "cannot unmarshal",
		`{"type":"llm","tools":["read_file"]}`:       "tools does not apply",
	}
	for in, want := range bad {
		_, err := ParseSpec([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", in, err, want)
		}
	}
}
