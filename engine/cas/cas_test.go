package cas

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/node"
)

func TestPutWrapsRawTextLikeTheOriginal(t *testing.T) {
	t.Parallel()
	s := Open(filepath.Join(t.TempDir(), "cas"))
	h, err := s.Put("hello")
	if err != nil || h != "SSVQ0RZ55P9Y4" {
		t.Fatalf("Put(hello) = %s, %v", h, err)
	}
	b, err := s.Get(h)
	if err != nil || string(b) != "type: content\npayload: hello\nrefs: []\n" {
		t.Fatalf("Get = %q, %v", b, err)
	}
	// A serialized node passes through unchanged: same hash as its bytes.
	h2, err := s.Put(string(b))
	if err != nil || h2 != h {
		t.Fatalf("Put(node yaml) = %s, %v; want %s", h2, err, h)
	}
	// Idempotent and different content, different hash.
	h3, _ := s.Put("hello")
	h4, _ := s.Put("hello world")
	if h3 != h || h4 == h {
		t.Fatalf("idempotence/distinctness broken: %s %s %s", h, h3, h4)
	}
}

func TestGetDeleteListExists(t *testing.T) {
	t.Parallel()
	s := Open(filepath.Join(t.TempDir(), "cas"))
	if l, err := s.List(); err != nil || len(l) != 0 {
		t.Fatalf("missing dir list = %v, %v", l, err)
	}
	if _, err := s.Get("SSVQ0RZ55P9Y4"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing get err = %v", err)
	}
	a, _ := s.Put("a")
	b, _ := s.PutNode(node.NewContent("b", []string{a}))
	// A temp file from an interrupted writer and a stray file are not blobs.
	if err := os.WriteFile(filepath.Join(s.Dir(), b+".txt.tmp.123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), "README"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := s.List()
	sort.Strings(got)
	want := []string{a, b}
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("List = %v, want %v", got, want)
	}
	if ok, _ := s.Exists(a); !ok {
		t.Fatal("Exists(a) = false")
	}
	if err := s.Delete(a); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(a); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if ok, _ := s.Exists(a); ok {
		t.Fatal("Exists after delete")
	}
	n, err := s.GetNode(b)
	if err != nil || n.References()[0] != a {
		t.Fatalf("GetNode = %v, %v", n, err)
	}
}

func TestBadHashesAreRejectedBeforeTouchingDisk(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	secret := filepath.Join(root, "secret.txt")
	if err := os.WriteFile(secret, []byte("do not read"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Open(filepath.Join(root, "cas"))
	for _, bad := range []string{"../secret", "../../etc/passwd", "", "SSVQ0RZ55P9Y", "ssvq0rz55p9y/", "SSVQ0RZ55P9YU"} {
		if _, err := s.Get(bad); err == nil || !strings.Contains(err.Error(), "invalid hash") {
			t.Errorf("Get(%q) err = %v", bad, err)
		}
		if err := s.Delete(bad); err == nil {
			t.Errorf("Delete(%q) accepted", bad)
		}
		if _, err := s.Exists(bad); err == nil {
			t.Errorf("Exists(%q) accepted", bad)
		}
	}
	if _, err := os.Stat(secret); err != nil {
		t.Fatal("secret file touched")
	}
	// Lower-case hashes are accepted and mean the same blob.
	h, _ := s.Put("hello")
	if b, err := s.Get(strings.ToLower(h)); err != nil || len(b) == 0 {
		t.Fatalf("lower-case get: %v", err)
	}
}

func TestGetNodeOnGarbage(t *testing.T) {
	t.Parallel()
	s := Open(filepath.Join(t.TempDir(), "cas"))
	h, _ := s.PutBytes([]byte("::: not yaml [\n"))
	if _, err := s.GetNode(h); !errors.Is(err, node.ErrNotNode) {
		t.Fatalf("GetNode garbage err = %v", err)
	}
}

func TestConcurrentPutsOfSameAndDifferentContent(t *testing.T) {
	t.Parallel()
	s := Open(filepath.Join(t.TempDir(), "cas"))
	var wg sync.WaitGroup
	hashes := make([]string, 64)
	for i := range hashes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			content := "shared"
			if i%2 == 1 {
				content = strings.Repeat("x", i)
			}
			h, err := s.Put(content)
			if err != nil {
				t.Error(err)
			}
			hashes[i] = h
		}(i)
	}
	wg.Wait()
	for i := 2; i < len(hashes); i += 2 {
		if hashes[i] != hashes[0] {
			t.Fatalf("same content, different hashes: %s %s", hashes[0], hashes[i])
		}
	}
	for _, h := range hashes {
		b, err := s.Get(h)
		if err != nil || !node.IsNodeYAML(b) {
			t.Fatalf("blob %s unreadable: %v", h, err)
		}
	}
	entries, _ := os.ReadDir(s.Dir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp.") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
}

func TestRefsIndex(t *testing.T) {
	t.Parallel()
	s := Open(filepath.Join(t.TempDir(), "cas"))
	a, _ := s.Put("a")
	b, _ := s.PutNode(node.NewContent("b", []string{a}))
	// already stored: no second line
	if _, err := s.PutNode(node.NewContent("b", []string{a})); err != nil {
		t.Fatal(err)
	}
	legacy, _ := s.PutBytes([]byte("type: content\npayload: x\nrefs:\n  - not-a-hash\n"))
	idx, err := s.RefsIndex()
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) != 2 || len(idx[a]) != 0 || len(idx[b]) != 1 || idx[b][0] != a {
		t.Fatalf("index = %v", idx)
	}
	if _, ok := idx[legacy]; ok {
		t.Fatal("a blob with non-hash refs must not be indexed")
	}
	// Torn and malformed lines are skipped.
	f, _ := os.OpenFile(filepath.Join(s.Dir(), "refs.idx"), os.O_APPEND|os.O_WRONLY, 0)
	if _, err := f.WriteString("garbage line\nSSVQ0RZ55P9Y4 D7V7\nZZZZZZZZZZZZY SSVQ0RZ55P9Y4\nD7V7WGCMTYHZG SSVQ0"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// A line without a count or a check, as older versions wrote, is not
	// trusted: its blob is read instead.
	idx, _ = s.RefsIndex()
	if _, ok := idx["ZZZZZZZZZZZZY"]; len(idx) != 2 || ok {
		t.Fatalf("index with junk = %v", idx)
	}
	// A rewrite keeps the given entries and existing appended ones, drops
	// entries whose blobs are gone.
	if err := s.RewriteRefsIndex(map[string][]string{b: {a}}, nil); err != nil {
		t.Fatal(err)
	}
	idx, _ = s.RefsIndex()
	if len(idx) != 2 || idx[b][0] != a {
		t.Fatalf("after rewrite = %v", idx)
	}
	if _, ok := idx["ZZZZZZZZZZZZY"]; ok {
		t.Fatal("entry of a missing blob survived the rewrite")
	}
}

// A put that races a collection of the same old blob returns only once the
// blob is stored and counts as young: whichever way the two interleave, the
// blob is there afterwards. Each case runs the put at one point of the
// collection's work.
func TestRePutRacingCollectionKeepsBlob(t *testing.T) {
	// Serial: sets the package-level testHookSweep.
	defer func() { testHookSweep = nil }()
	for _, c := range []struct {
		point string
		put   func(s *Store, path string)
	}{
		// The whole put between the age check and the removal.
		{"aged", func(s *Store, _ string) { putOrFail(t, s, "raced") }},
		// The whole put while the blob is moved aside: it finds no blob
		// and writes it again.
		{"moved", func(s *Store, _ string) { putOrFail(t, s, "raced") }},
		// A put whose touch found the blob just before it was moved: the
		// new time lands on the moved file.
		{"moved", func(_ *Store, tomb string) {
			now := time.Now()
			if err := os.Chtimes(tomb, now, now); err != nil {
				t.Error(err)
			}
		}},
	} {
		s := Open(filepath.Join(t.TempDir(), "cas"))
		h, err := s.Put("raced")
		if err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(s.path(h), old, old); err != nil {
			t.Fatal(err)
		}
		testHookSweep = func(point, path string) {
			if point == c.point {
				c.put(s, path)
			}
		}
		if _, err := s.DeleteUnlessNewer(h, time.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		testHookSweep = nil
		if b, err := s.Get(h); err != nil || !strings.Contains(string(b), "raced") {
			t.Fatalf("put at %q: blob after the collection = %q, %v", c.point, b, err)
		}
		entries, _ := os.ReadDir(s.Dir())
		for _, e := range entries {
			if strings.Contains(e.Name(), ".gc.") {
				t.Fatalf("private name left behind: %s", e.Name())
			}
		}
	}
}

// BenchmarkPutBytesExisting is the common re-put: identical content a thread
// stores again (a prompt, an empty output).
func BenchmarkPutBytesExisting(b *testing.B) {
	s := Open(filepath.Join(b.TempDir(), "cas"))
	blob, _ := node.NewContent("the same step output, stored again", nil).Marshal()
	if _, err := s.PutBytes(blob); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.PutBytes(blob); err != nil {
			b.Fatal(err)
		}
	}
}

// putOrFail is a put in a hook run midway through a collection: it marks
// the test failed rather than stopping it there.
func putOrFail(t *testing.T, s *Store, content string) {
	t.Helper()
	if _, err := s.Put(content); err != nil {
		t.Error(err)
	}
}
