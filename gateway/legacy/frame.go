package legacy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// RequestFrame is what the gateway sends an original client: one whole
// HTTP request. Body is nil (JSON null) for GET, HEAD and empty bodies.
type RequestFrame struct {
	ID      string            `json:"id"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    *string           `json:"body"`
}

// ResponseFrame is what an original client answers: one whole HTTP
// response, correlated with its request by ID.
type ResponseFrame struct {
	ID      string
	Status  int
	Headers map[string]string
	Body    string
}

// ErrInvalidFrame is wrapped by every error of ParseResponse and
// ParseRequest.
var ErrInvalidFrame = errors.New("invalid frame")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidFrame, fmt.Sprintf(format, args...))
}

// ParseResponse validates a client → gateway frame exactly as the
// original's parseWsResponseJson: the text must be a JSON object whose "id"
// is a non-empty string, "status" a finite number (truncated toward zero to
// an integer), "headers" an object whose values are all strings and "body"
// a string. Other members are ignored. Keys match case-sensitively, and a
// repeated key takes its last value, as in JavaScript's JSON.parse.
//
// A status beyond ±2^31 is reported as -1: it is no HTTP status either way,
// and the caller refuses anything outside 200–599.
func ParseResponse(data []byte) (ResponseFrame, error) {
	obj, err := object(data)
	if err != nil {
		return ResponseFrame{}, err
	}
	var f ResponseFrame
	if f.ID, err = stringMember(obj, "id"); err != nil {
		return ResponseFrame{}, err
	}
	if f.ID == "" {
		return ResponseFrame{}, invalid(`"id" is empty`)
	}
	if f.Status, err = statusMember(obj); err != nil {
		return ResponseFrame{}, err
	}
	if f.Headers, err = headersMember(obj); err != nil {
		return ResponseFrame{}, err
	}
	if f.Body, err = stringMember(obj, "body"); err != nil {
		return ResponseFrame{}, err
	}
	return f, nil
}

// ParseRequest validates a gateway → client frame as the original's
// parseWsRequestJson: a JSON object whose "id", "method" and "path" are
// non-empty strings, "headers" an object of strings and "body" null or a
// string. The gateway never parses requests; this is the client's side, for
// Serve and tests.
func ParseRequest(data []byte) (RequestFrame, error) {
	obj, err := object(data)
	if err != nil {
		return RequestFrame{}, err
	}
	var f RequestFrame
	for _, m := range []struct {
		key string
		dst *string
	}{{"id", &f.ID}, {"method", &f.Method}, {"path", &f.Path}} {
		if *m.dst, err = stringMember(obj, m.key); err != nil {
			return RequestFrame{}, err
		}
		if *m.dst == "" {
			return RequestFrame{}, invalid("%q is empty", m.key)
		}
	}
	if f.Headers, err = headersMember(obj); err != nil {
		return RequestFrame{}, err
	}
	raw, ok := obj["body"]
	switch {
	case !ok:
		return RequestFrame{}, invalid(`"body" is missing`)
	case string(raw) == "null":
	default:
		s, err := stringMember(obj, "body")
		if err != nil {
			return RequestFrame{}, invalid(`"body" must be null or a string`)
		}
		f.Body = &s
	}
	return f, nil
}

// object decodes a JSON object into its members, undecoded.
func object(data []byte) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil || obj == nil {
		return nil, invalid("not a JSON object")
	}
	return obj, nil
}

// stringMember is obj[key] when it is a JSON string.
func stringMember(obj map[string]json.RawMessage, key string) (string, error) {
	raw := bytes.TrimSpace(obj[key])
	if len(raw) == 0 || raw[0] != '"' {
		return "", invalid("%q must be a string", key)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid("%q must be a string", key)
	}
	return s, nil
}

func statusMember(obj map[string]json.RawMessage) (int, error) {
	raw := bytes.TrimSpace(obj["status"])
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, invalid(`"status" must be a number`)
	}
	// The decoder has checked the grammar; a JSON number is also Go float
	// syntax. Overflow gives ±Inf (not finite); underflow gives 0, as in
	// JavaScript.
	v, _ := strconv.ParseFloat(string(raw), 64)
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, invalid(`"status" must be a finite number`)
	}
	v = math.Trunc(v)
	if v > math.MaxInt32 || v < math.MinInt32 {
		return -1, nil
	}
	return int(v), nil
}

func headersMember(obj map[string]json.RawMessage) (map[string]string, error) {
	raw := bytes.TrimSpace(obj["headers"])
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid(`"headers" must be an object`)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, invalid(`"headers" must be an object`)
	}
	out := make(map[string]string, len(members))
	for k := range members {
		v, err := stringMember(members, k)
		if err != nil {
			return nil, invalid("header %q must be a string", k)
		}
		out[k] = v
	}
	return out, nil
}
