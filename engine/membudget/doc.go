// Package membudget keeps one role's JavaScript from taking the engine host
// down. Every JavaScript runtime gets a memory budget (its thread's:
// workflow.yaml's config.memoryBudget, the host's --memory-budget, or
// DefaultBudget); a runtime found holding more is interrupted and its
// thread fails with an ExceededError that says what happened and how to
// raise the budget, while the other threads run on.
//
// # How memory is charged
//
// Go cannot say which goroutine holds which part of the heap, and the
// runtimes share one heap, so a single watchdog goroutine per process
// estimates it from the runtime's own figures (runtime/metrics: bytes
// allocated, collections completed, live heap after each collection),
// sampled every Interval while any runtime executes. Once a sample finds
// none executed since the last and nothing waits on a collection, the
// watchdog parks until a runtime enters (or one closes): threads that
// wait on models, people or timers cost no CPU.
//
//   - Each runtime marks when it executes (Account.Enter and Leave around
//     the time its goroutine holds the runtime). What the process allocated
//     between two samples is charged to the runtimes that executed in
//     between, by how long each did, as a share of the elapsed time; with
//     none executing it is the host's. A thread waiting on a model, an
//     agent or a timer executes nothing and is charged nothing.
//   - When a collection has finished, the growth of the live heap since
//     the previous one is split by what each runtime allocated meanwhile
//     (at most all of it): its confirmed charge. A smaller live heap first
//     pays back the charges of runtimes closed since, then lowers every
//     charge in proportion.
//   - A runtime is stopped only on its confirmed charge: on what a
//     collection found live, never on allocation, since garbage is not
//     held. When confirmed plus allocated-since exceeds a budget, the
//     watchdog forces a collection to find out: at most every 100 ms for
//     a runtime that churns garbage, every Interval while one is seen
//     growing, and less often when collections are slow (they stay under
//     a fifth of the time, up to a second apart). It also collects soon
//     after a runtime that held much is closed, so that its memory going
//     does not hide others' growth. One runtime is stopped at a time, the
//     one furthest over; another only after its memory is seen freed, so
//     that a bystander charged a share of the runaway's growth is judged
//     again without it.
//
// A host command also calls SetupHost, which sets Go's memory limit from
// what the operating system allows the process (cgroup memory.max,
// RLIMIT_AS), so the collector works harder before the process dies, and
// makes that the host's overall cap: when a collection finds the live heap
// above it, the runtime charged the most of those that executed lately
// (a thread that only holds memory while it waits did not fill the heap)
// is stopped even within its budget, as long as it holds a quarter of the
// heap. Whatever its budget, a runtime that executes may not hold more
// than a third of that cap (Reserve refuses past it, and a collection
// that finds it holding more stops it): one operation that copies what
// it holds, such as s + s, which nothing can ask before it allocates,
// must still fit beside it. For the same reason a runtime that allocates
// more than half of its third within one tick without having reserved
// it is stopped at that tick, before any collection.
//
// # One call at a time
//
// A single allocation bigger than what is left (one huge string or
// ArrayBuffer) happens before any sample, and Go does not fail an
// allocation the process cannot get: it ends the process. So a call that
// allocates an amount a script chose asks first: Account.Reserve (the
// amount it will allocate, which is then charged to the runtime at once)
// or Account.Fits (a bound on it). Either refuses, with a RefusedError,
// a request that would take the runtime past its budget beside what it
// holds, or past what the host has left: Go's memory limit beside what
// Go has mapped, what RLIMIT_AS leaves of the address space, the memory
// the system has available. Before refusing on memory that may be
// garbage it collects, as often as the watchdog would. Package jsrt asks
// before every such call it makes or wraps.
//
// # What it cannot do
//
// Memory held only for a moment (less than a collection or two) may pass
// unnoticed: the budget bounds what a runtime keeps, not each peak. An
// operation of the interpreter itself, not a call (s + s of a large
// string, a BigInt shifted or raised by a large amount), allocates
// without asking; the third and the burst rules stop a runaway made of
// them only when the watchdog runs in time, and a collection that waits
// for such an operation to end (Go cannot preempt a long copy) holds the
// watchdog too. Several runtimes executing at
// the same moment share what was allocated meanwhile, so a thread that
// runs long computations beside a runaway is charged part of the
// runaway's growth: the runaway still reaches its budget first unless the
// other executes as much as it does, in which case either may be stopped.
// Memory held by Go work for a runtime off its goroutine (a response body
// being read, a child process's output) is charged to whichever runtime
// executes while it is allocated, or to the host.
package membudget
