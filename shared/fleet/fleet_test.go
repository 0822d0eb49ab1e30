package fleet

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEventIDs(t *testing.T) {
	t.Parallel()
	inst := NewInstance()
	if strings.Contains(inst, "-") || len(inst) != 16 || inst == NewInstance() {
		t.Fatalf("instance %q", inst)
	}
	id := FormatEventID(inst, 42)
	if i, seq, err := ParseEventID(id); err != nil || i != inst || seq != 42 {
		t.Fatalf("%s: %s %d %v", id, i, seq, err)
	}
	if longest := FormatEventID(inst, math.MaxUint64); len(longest) > MaxEventIDBytes {
		t.Fatalf("an id of ours is %d bytes, over the bound", len(longest))
	}
	for _, bad := range []string{"", "abc", "-3", "abc-", "abc-x", "abc--1", "abc-1.5", strings.Repeat("a", 1<<20) + "-1"} {
		if _, _, err := ParseEventID(bad); !errors.Is(err, ErrBadEventID) {
			t.Errorf("ParseEventID(%q): %v", bad, err)
		}
	}
}

func TestDecoderReadsWhatAppendEventWrites(t *testing.T) {
	t.Parallel()
	var stream []byte
	stream = AppendEvent(stream, Event{ID: "a-0", Name: EventReset, Data: []byte(`{"instance":"a"}`)})
	stream = append(stream, Ping...)
	stream = AppendEvent(stream, Event{ID: "a-1", Name: EventThread, Data: []byte(`{"id":"t"}`)})
	stream = append(stream, "data: line one\ndata: line two\n\n"...)
	stream = append(stream, "id: a-2\nevent: synced\ndata: {}"...) // cut short: dropped
	d := NewDecoder(strings.NewReader(string(stream)))
	want := []Event{
		{ID: "a-0", Name: EventReset, Data: []byte(`{"instance":"a"}`)},
		{ID: "a-1", Name: EventThread, Data: []byte(`{"id":"t"}`)},
		{Data: []byte("line one\nline two")},
	}
	for _, w := range want {
		ev, err := d.Next()
		if err != nil || ev.ID != w.ID || ev.Name != w.Name || string(ev.Data) != string(w.Data) {
			t.Fatalf("got %+v %v, want %+v", ev, err, w)
		}
	}
	if ev, err := d.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last event: %+v %v", ev, err)
	}
}

func TestDecoderRefusesHugeEvents(t *testing.T) {
	t.Parallel()
	d := NewDecoder(strings.NewReader("data: " + strings.Repeat("x", MaxEventSize) + "\n\n"))
	if _, err := d.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("huge event: %v", err)
	}
}

func TestTruncatePrompt(t *testing.T) {
	t.Parallel()
	short := "héllo"
	if TruncatePrompt(short) != short {
		t.Fatal("short prompt changed")
	}
	long := strings.Repeat("é", PromptMaxRunes+10)
	got := TruncatePrompt(long)
	if utf8.RuneCountInString(got) != PromptMaxRunes || !utf8.ValidString(got) || !strings.HasSuffix(got, CutMark) {
		t.Fatalf("%d runes, ending %q", utf8.RuneCountInString(got), got[len(got)-8:])
	}
	exact := strings.Repeat("日", PromptMaxRunes)
	if TruncatePrompt(exact) != exact {
		t.Fatal("a prompt of exactly the bound was cut")
	}
}
