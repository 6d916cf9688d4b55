package plan

import (
	"fmt"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Codes of the native layout (contract.Native).
const (
	// CodeNativeNeedsVersion (error, below 4.3.1): a queue of the native
	// layout on a broker that cannot delay its retries: 4.3.0 has the
	// arguments but not the policy keys' validator, and older releases
	// ignore x-delayed-retry-*, so every retry would come back at once.
	CodeNativeNeedsVersion = "RT106"
	// CodeLayoutKept (info): a live queue keeps its layout where auto
	// gives a queue not live yet another; the note says how to move it.
	CodeLayoutKept = "RT107"
	// CodeKeptLayoutConflict (error): the spec asks of a live queue, whose
	// layout auto keeps, what that layout cannot do (a delivery_limit on a
	// native queue): the plan would write a key the broker overrides.
	CodeKeptLayoutConflict = "RT109"
)

// LayoutKept is a live queue that keeps its layout where auto would give
// a new queue another (the spec's resolution reports them): Check notes
// each (RT107) with Move, one line saying how to move it.
type LayoutKept struct {
	Address topology.Address
	Move    string
	// Conflict, when not empty, is what the spec asks that the kept layout
	// cannot do, and how to fix the spec: Check refuses it (RT109).
	Conflict string
}

// checkNative refuses, before any write, the queues of the native layout
// that the judged version v cannot run; an unknown version is not judged,
// as for every version check.
func checkNative(p Plan, v topology.Version) []Diagnostic {
	if p := rabbitmq.ProfileFor(v); !p.Known() || p.NativeDelayedRetry() {
		return nil
	}
	var ds []Diagnostic
	for _, c := range p.Changes {
		if c.After == nil || c.After.Queue == nil || c.Action == Delete {
			continue
		}
		if !contract.IsNative(c.After.Queue.Arguments) {
			continue
		}
		ds = append(ds, Diagnostic{Code: CodeNativeNeedsVersion, Severity: SeverityError, Address: c.Address,
			Message: fmt.Sprintf("%s has layout native, which needs RabbitMQ %s or later; RabbitMQ %s would not delay its retries; nothing is written until the spec changes (layout auto, or shared)", c.Address, rabbitmq.First(rabbitmq.Profile.NativeDelayedRetry), v)})
	}
	return ds
}

// checkKept notes the live queues that keep their layout.
func checkKept(kept []LayoutKept) []Diagnostic {
	ds := make([]Diagnostic, 0, len(kept))
	for _, k := range kept {
		if k.Conflict != "" {
			ds = append(ds, Diagnostic{Code: CodeKeptLayoutConflict, Severity: SeverityError, Address: k.Address, Message: k.Conflict})
			continue
		}
		ds = append(ds, Diagnostic{Code: CodeLayoutKept, Severity: SeverityInfo, Address: k.Address, Message: k.Move})
	}
	return ds
}
