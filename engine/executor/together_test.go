package executor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/threads"
)

// TestThreadsOfOneWorkflowRunTogether: random numbers of threads of one
// workflow run at once (their index writes grouped), while another
// writer adds and removes threads of its own in the same threads.json
// under its lock alone. Throughout, every head the index names is stored
// with the content node it names; each step, once published, is named by
// the index; at the end every thread is in the history with its whole
// chain, and the index holds exactly the other writer's threads.
func TestThreadsOfOneWorkflowRunTogether(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 3 {
		e := newExec(t)
		k := 2 + rng.IntN(15)
		lengths := make([]int, k)
		for i := range lengths {
			lengths[i] = 1 + rng.IntN(6)
		}
		dir := e.Layout.BundleDir("BUNDLEHASHAAA")
		foreign, err := e.CAS.Put("a thread of another writer")
		if err != nil {
			t.Fatal(err)
		}

		var done atomic.Bool
		problems := make(chan error, 64)
		report := func(err error) {
			select {
			case problems <- err:
			default:
			}
		}
		var bg sync.WaitGroup
		// The reader: what the index names is stored.
		bg.Go(func() {
			for !done.Load() {
				idx, err := threads.ReadIndex(dir)
				if err != nil {
					report(err)
					return
				}
				for id, en := range idx {
					if strings.HasPrefix(id, "OTHER") || en.Head == en.Start {
						continue
					}
					n, err := e.CAS.GetNode(en.Head)
					st, ok := n.(node.State)
					if err != nil || !ok {
						report(fmt.Errorf("thread %s: the index names %s, which is not a stored state (%v)", id, en.Head, err))
						return
					}
					if ok, err := e.CAS.Exists(st.Payload.Content); err != nil || !ok {
						report(fmt.Errorf("thread %s: head %s names content %s, which is not stored", id, en.Head, st.Payload.Content))
						return
					}
				}
			}
		})
		// The other writer, under the index lock alone.
		others := threads.Index{}
		otherRng := rand.New(rand.NewPCG(uint64(round), 5))
		bg.Go(func() {
			for i := 0; !done.Load() || i < 10; i++ {
				id := fmt.Sprintf("OTHER%d", otherRng.IntN(5))
				en := threads.Entry{Head: foreign, Start: foreign, UpdatedAt: int64(i)}
				remove := i%3 == 2
				err := threads.Modify(dir, func(idx threads.Index) (bool, error) {
					if remove {
						delete(idx, id)
					} else {
						idx[id] = en
					}
					return true, nil
				})
				if err != nil {
					report(err)
					return
				}
				if remove {
					delete(others, id)
				} else {
					others[id] = en
				}
			}
		})

		var wg sync.WaitGroup
		for i := range k {
			roles := make([]string, lengths[i])
			for j := range roles {
				roles[j] = fmt.Sprintf("r%d", j)
			}
			wg.Go(func() {
				id := fmt.Sprintf("T%02d", i)
				th := Thread{ID: id, BundleHash: "BUNDLEHASHAAA", WorkflowName: "demo", Prompt: "hello"}
				if err := e.Begin(&th); err != nil {
					report(err)
					return
				}
				env := Env{OnStep: func(head string) {
					n, err := e.CAS.GetNode(head)
					if st, ok := n.(node.State); err != nil || !ok || st.Payload.Role == node.RoleEnd {
						return
					}
					idx, err := threads.ReadIndex(dir)
					if err != nil || idx[id].Head != head {
						report(fmt.Errorf("thread %s: step %s published before the index named it (%v)", id, head, err))
					}
				}}
				res, err := e.Run(context.Background(), linear{roles: roles}, th, env)
				if err != nil || res.ReturnCode != 0 {
					report(fmt.Errorf("thread %s: %+v, %v", id, res, err))
					return
				}
				frames, err := threads.Walk(e.CAS, res.RootHash)
				if err != nil || len(frames) != len(roles)+1 {
					report(fmt.Errorf("thread %s: %d frames (%v), want %d", id, len(frames), err, len(roles)+1))
				}
			})
		}
		wg.Wait()
		done.Store(true)
		bg.Wait()
		close(problems)
		for err := range problems {
			t.Errorf("round %d: %v", round, err)
		}
		if t.Failed() {
			return
		}
		idx, err := threads.ReadIndex(dir)
		if err != nil || !reflect.DeepEqual(idx, others) {
			t.Fatalf("round %d: the index ends as %v (%v), want the other writer's %v", round, idx, err, others)
		}
		hist, err := threads.ReadHistory(dir)
		if err != nil || len(hist) != k {
			t.Fatalf("round %d: %d history lines (%v), want %d", round, len(hist), err, k)
		}
	}
}
