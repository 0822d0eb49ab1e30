package legacy

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestParseResponse(t *testing.T) {
	t.Parallel()
	ok := []struct {
		in   string
		want ResponseFrame
	}{
		{`{"id":"a","status":200,"headers":{},"body":""}`, ResponseFrame{ID: "a", Status: 200, Headers: map[string]string{}, Body: ""}},
		{`{"id":"a","status":201.9,"headers":{"content-type":"application/json"},"body":"{}","extra":[1]}`,
			ResponseFrame{ID: "a", Status: 201, Headers: map[string]string{"content-type": "application/json"}, Body: "{}"}},
		{` { "id" : "x" , "status" : -0 , "headers" : { } , "body" : "é\u00e9" } `, ResponseFrame{ID: "x", Status: 0, Headers: map[string]string{}, Body: "éé"}},
		{`{"id":"a","status":-404.5,"headers":{},"body":""}`, ResponseFrame{ID: "a", Status: -404, Headers: map[string]string{}}},
		{`{"id":"a","status":2e2,"headers":{},"body":""}`, ResponseFrame{ID: "a", Status: 200, Headers: map[string]string{}}},
		{`{"id":"a","status":1e-400,"headers":{},"body":""}`, ResponseFrame{ID: "a", Status: 0, Headers: map[string]string{}}},
		{`{"id":"a","status":1e300,"headers":{},"body":""}`, ResponseFrame{ID: "a", Status: -1, Headers: map[string]string{}}},
		// A repeated key takes its last value, as JSON.parse does.
		{`{"id":1,"id":"b","status":"x","status":204,"headers":{"a":"1","a":"2"},"body":"z"}`,
			ResponseFrame{ID: "b", Status: 204, Headers: map[string]string{"a": "2"}, Body: "z"}},
	}
	for _, c := range ok {
		got, err := ParseResponse([]byte(c.in))
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
	bad := []string{
		``, `null`, `[]`, `"x"`, `42`, `{`, `{"id":"a","status":200,"headers":{},"body":""} trailing`,
		`{"status":200,"headers":{},"body":""}`,                     // no id
		`{"id":"","status":200,"headers":{},"body":""}`,             // empty id
		`{"id":7,"status":200,"headers":{},"body":""}`,              // id a number
		`{"id":null,"status":200,"headers":{},"body":""}`,           // id null
		`{"ID":"a","status":200,"headers":{},"body":""}`,            // keys are case-sensitive
		`{"id":"a","headers":{},"body":""}`,                         // no status
		`{"id":"a","status":"200","headers":{},"body":""}`,          // status a string
		`{"id":"a","status":null,"headers":{},"body":""}`,           // status null
		`{"id":"a","status":true,"headers":{},"body":""}`,           // status a boolean
		`{"id":"a","status":1e400,"headers":{},"body":""}`,          // not finite
		`{"id":"a","status":-1e400,"headers":{},"body":""}`,         // not finite
		`{"id":"a","status":200,"body":""}`,                         // no headers
		`{"id":"a","status":200,"headers":null,"body":""}`,          // headers null
		`{"id":"a","status":200,"headers":[],"body":""}`,            // headers an array
		`{"id":"a","status":200,"headers":"x","body":""}`,           // headers a string
		`{"id":"a","status":200,"headers":{"a":1},"body":""}`,       // a header not a string
		`{"id":"a","status":200,"headers":{"a":null},"body":""}`,    // a header null
		`{"id":"a","status":200,"headers":{"a":["x"]},"body":""}`,   // a header an array
		`{"id":"a","status":200,"headers":{}}`,                      // no body
		`{"id":"a","status":200,"headers":{},"body":null}`,          // body null
		`{"id":"a","status":200,"headers":{},"body":{"text":"x"}}`,  // body an object
		`{"id":"a","status":200,"headers":{},"body":"x","body":1}`,  // the last body wins, and is a number
		`{"id":"a","status":NaN,"headers":{},"body":""}`,            // not JSON
		`{"id":"a","status":Infinity,"headers":{},"body":""}`,       // not JSON
		`{"id":"a","status":0x10,"headers":{},"body":""}`,           // not JSON
		`{"id":"a","status":200,"headers":{},"body":"\ud800\udc00"`, // cut short
	}
	for _, in := range bad {
		if got, err := ParseResponse([]byte(in)); !errors.Is(err, ErrInvalidFrame) {
			t.Errorf("%s: accepted as %+v (%v)", in, got, err)
		}
	}
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	body := "x"
	got, err := ParseRequest([]byte(`{"id":"1","method":"POST","path":"/api/x?a=1","headers":{"k":"v"},"body":"x"}`))
	if err != nil || !reflect.DeepEqual(got, RequestFrame{ID: "1", Method: "POST", Path: "/api/x?a=1", Headers: map[string]string{"k": "v"}, Body: &body}) {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := ParseRequest([]byte(`{"id":"1","method":"GET","path":"/","headers":{},"body":null}`)); err != nil || got.Body != nil {
		t.Fatalf("null body: %+v %v", got, err)
	}
	for _, in := range []string{
		`{"id":"1","method":"","path":"/","headers":{},"body":null}`,
		`{"id":"1","method":"GET","path":"","headers":{},"body":null}`,
		`{"id":"1","method":"GET","path":"/","headers":{}}`,
		`{"id":"1","method":"GET","path":"/","headers":{},"body":3}`,
		`{"id":"1","method":"GET","path":"/","headers":{"a":false},"body":null}`,
	} {
		if _, err := ParseRequest([]byte(in)); !errors.Is(err, ErrInvalidFrame) {
			t.Errorf("%s: accepted", in)
		}
	}
}

// FuzzLegacyFrame checks that the response-frame parser never panics, that
// what it accepts has the promised shape, and that an accepted frame
// re-encoded parses to the same frame.
func FuzzLegacyFrame(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","status":200,"headers":{"content-type":"text/plain"},"body":"hi"}`,
		`{"id":"a","status":200.5,"headers":{},"body":""}`,
		`{"id":"a","status":1e999,"headers":{},"body":""}`,
		`{"id":"a","status":200,"headers":[],"body":""}`,
		`{"id":"\u0000","status":-1,"headers":{"":""},"body":"\ufffd"}`,
		`null`, `[]`, `{}`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := ParseResponse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidFrame) {
				t.Fatalf("error %v does not wrap ErrInvalidFrame", err)
			}
			return
		}
		if fr.ID == "" || fr.Headers == nil {
			t.Fatalf("accepted a frame without id or headers: %+v", fr)
		}
		again, err := json.Marshal(wireResponse(fr))
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseResponse(again)
		if err != nil || !reflect.DeepEqual(back, fr) {
			t.Fatalf("round trip: %+v -> %s -> %+v %v", fr, again, back, err)
		}
	})
}
