package chaos

import (
	"math/rand/v2"
	"sort"
)

// Kind is a kind of fault.
type Kind string

// The faults the suite injects.
const (
	KillClone   Kind = "sigkill-worker-mid-clone"
	KillAgent   Kind = "sigkill-worker-mid-agent"
	KillVerify  Kind = "sigkill-worker-mid-verify"
	KillPublish Kind = "sigkill-worker-mid-publish"
	StopWorker  Kind = "sigstop-worker-past-ack-wait"
	KillNATS    Kind = "sigkill-nats-node"
	RemoveBox   Kind = "docker-rm-task-container"
	Duplicate   Kind = "duplicate-submission"
)

// Kinds lists every fault kind, in report order.
var Kinds = []Kind{KillClone, KillAgent, KillVerify, KillPublish, StopWorker, KillNATS, RemoveBox, Duplicate}

// shapeFor is the shape of a task a fault is aimed at.
var shapeFor = map[Kind]shape{
	KillClone:   shapeBigClone,
	KillAgent:   shapeLong,
	KillVerify:  shapeSlowVerify,
	KillPublish: shapeQuick,
	StopWorker:  shapeLong,
	RemoveBox:   shapeLong,
	Duplicate:   shapeQuick,
}

// plan is what a seed decides: each task's shape and repository, the
// tasks each fault is aimed at, the submissions at which a NATS node is
// killed, and the pauses of the faults.
type plan struct {
	shapes []shape
	repos  []int // index into the workload's small repositories
	aimed  map[int]Kind
	// github says which tasks come from GitHub: those a publish fault is
	// aimed at, and a share of those no fault is.
	github []bool
	// natsAt are the task indexes at whose submission a NATS node is
	// killed; natsLeader says whether that kill is aimed at the leader.
	natsAt     []int
	natsLeader map[int]bool
	// downFor is how long each killed NATS node stays down, and
	// restartAfter how long a killed worker stays down, per fault.
	rng *rand.Rand
}

// newPlan draws a plan for n tasks with perKind faults of each kind from
// seed. Faults are aimed at tasks in the middle 90% of the run, one per
// task; the rest are mostly quick tasks with some long and slow-verify
// ones.
func newPlan(seed uint64, n, perKind, repos int, githubShare float64) *plan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := &plan{shapes: make([]shape, n), repos: make([]int, n), aimed: map[int]Kind{}, natsLeader: map[int]bool{},
		github: make([]bool, n), rng: rng}
	for i := range n {
		switch r := rng.IntN(100); {
		case r < 90:
			p.shapes[i] = shapeQuick
		case r < 97:
			p.shapes[i] = shapeLong
		default:
			p.shapes[i] = shapeSlowVerify
		}
		p.repos[i] = rng.IntN(repos)
	}
	lo, hi := n/20, n-n/20
	free := rng.Perm(hi - lo)
	next := 0
	for _, k := range Kinds {
		for j := range perKind {
			if next >= len(free) {
				break
			}
			i := lo + free[next]
			next++
			if k == KillNATS {
				p.natsAt = append(p.natsAt, i)
				p.natsLeader[i] = j%2 == 0
				continue
			}
			p.aimed[i] = k
			p.shapes[i] = shapeFor[k]
		}
	}
	sort.Ints(p.natsAt)
	for i := range n {
		k, aimed := p.aimed[i]
		// A publish fault needs a task that publishes: one from GitHub.
		p.github[i] = k == KillPublish || !aimed && githubShare > 0 && rng.Float64() < githubShare
		if p.github[i] {
			p.shapes[i] = shapeQuick
		}
	}
	return p
}
