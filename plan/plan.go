package plan

import (
	"fmt"
	"strconv"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Action is what happens to one object. It is a byte, not its name, so
// that a Change stays small; text and JSON show the name.
type Action uint8

const (
	actionUnset Action = iota
	NoOp
	Create
	Update
	Replace
	Delete
	// Migrate re-creates a queue with properties that cannot change in
	// place without losing its messages: see Migration.
	Migrate
)

var actionNames = [...]string{
	actionUnset: "", NoOp: "no-op", Create: "create", Update: "update",
	Replace: "replace", Delete: "delete", Migrate: "migrate",
}

// String returns the action's name, e.g. "create".
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// MarshalText writes the action's name.
func (a Action) MarshalText() ([]byte, error) {
	if a == actionUnset || int(a) >= len(actionNames) {
		return nil, fmt.Errorf("plan: no name for action %d", a)
	}
	return []byte(actionNames[a]), nil
}

// UnmarshalText reads an action's name.
func (a *Action) UnmarshalText(b []byte) error {
	for i, n := range actionNames {
		if i != int(actionUnset) && n == string(b) {
			*a = Action(i)
			return nil
		}
	}
	return fmt.Errorf("unknown action %q", b)
}

// Object is the state of one object on one side of a change: exactly one
// field is set, matching Address.Kind (Vhost uses Address.Name alone).
type Object struct {
	Exchange *topology.Exchange
	Queue    *topology.Queue
	Binding  *topology.Binding
	Policy   *topology.Policy
}

// Change is one planned change. What only some changes carry (a reason,
// counts, ownership) is in Details, nil on the rest, so that the common
// change, a create, stays small. Read those fields through the methods of
// the same name, which see a nil Details as the zero one. Its JSON is
// planjson.Change, the one definition of it.
type Change struct {
	Action  Action
	Address topology.Address
	Before  *Object
	After   *Object
	*Details
}

// Details are the fields of a Change that most changes leave empty.
type Details struct {
	// Reasons say why the change is what it is, e.g. that a queue
	// argument is immutable or that the object left the spec; plans show
	// them as one sentence (Change.Reason).
	Reasons []Reason
	// Messages is the number of messages in a queue that the change deletes
	// (replace or delete), as read from the broker; nil when unknown.
	Messages *int64
	// Consumers is the number of consumers attached to a queue that the
	// change deletes (replace or delete), as read from the broker; they may
	// hold unacknowledged deliveries that the delete drops. Nil when
	// unknown.
	Consumers *int64
	// Why is what code branches on beyond the action, one of a few
	// exclusive marks; JSON shows it as the boolean of its name
	// (planjson.Change).
	Why Why
	// Owner says why rmqtopo believes a deleted object is its own: the
	// ownership record that owns it. Set on every Delete.
	Owner string
	// Conflict names the other specs whose records want the object with
	// other attributes; Check refuses such a change (RT007).
	Conflict []string
	// Pinned lists, on a NoOp that keeps a queue, the arguments the queue
	// keeps although the spec now leaves them to its policy: their values
	// agree today, but a later change of them needs a replace.
	Pinned []string
	// InPolicy lists, on a NoOp that keeps a queue an earlier rmqtopo
	// made, the arguments the spec now declares that the queue lacks:
	// its own policy carries them instead (legacy.go).
	InPolicy []string
	// WaitFor lists, on a Migrate, the retired queues (spec.Retired) that
	// dead-letter into the queue by its name through the default
	// exchange: no binding can hand them to the temporary queue, so apply
	// lets them drain into the old queue before migrating it (retire.go).
	WaitFor []string
}

// EditDetails returns c's Details for setting them, made if c has none.
func (c *Change) EditDetails() *Details {
	if c.Details == nil {
		c.Details = &Details{}
	}
	return c.Details
}

// details returns c's Details for reading: the zero Details when it has
// none.
func (c *Change) details() *Details {
	if c.Details == nil {
		return &noDetails
	}
	return c.Details
}

// noDetails is what a Change without Details reads as; never written.
var noDetails Details

// Reasons is Details.Reasons, or nil without Details.
func (c Change) Reasons() []Reason { return c.details().Reasons }

// Reason is the sentence of c's Reasons, parts joined by "; ", or "".
func (c Change) Reason() string { return reasonsText(c.details().Reasons) }

// Messages is Details.Messages, or nil without Details.
func (c Change) Messages() *int64 { return c.details().Messages }

// Consumers is Details.Consumers, or nil without Details.
func (c Change) Consumers() *int64 { return c.details().Consumers }

// Why is Details.Why, or WhyNone without Details.
func (c Change) Why() Why { return c.details().Why }

// Owner is Details.Owner, or "" without Details.
func (c Change) Owner() string { return c.details().Owner }

// Conflict is Details.Conflict, or nil without Details.
func (c Change) Conflict() []string { return c.details().Conflict }

// Pinned is Details.Pinned, or nil without Details.
func (c Change) Pinned() []string { return c.details().Pinned }

// WaitFor is Details.WaitFor, or nil without Details.
func (c Change) WaitFor() []string { return c.details().WaitFor }

// InPolicy is Details.InPolicy, or nil without Details.
func (c Change) InPolicy() []string { return c.details().InPolicy }

// Why says why a change is what it is, beyond its action, where code must
// tell (Terraform's ActionReason): at most one of these holds for a
// change, each for one action.
type Why uint8

const (
	// WhyNone: nothing beyond the action.
	WhyNone Why = iota
	// WhyResumes marks a Migrate of a queue whose migration is in
	// progress: its temporary queue exists and holds messages Messages
	// counts.
	WhyResumes
	// WhyMayDelete marks a Delete made from a source that could not show
	// ownership records: apply deletes the object only if the spec's
	// record owns it. Plans show it as "? may delete".
	WhyMayDelete
	// WhyLeftBehind marks a NoOp that keeps a queue this spec's record
	// owns but the spec no longer declares, because the plan does not
	// prune: its messages stay stranded there until someone deletes or
	// drains it. Messages holds its count.
	WhyLeftBehind
	// WhyDraining marks a NoOp that keeps a retired wait queue, no longer
	// in the spec, until its messages have expired back into their work
	// queue; Messages then holds the count still waiting, nil when
	// unknown.
	WhyDraining
	// WhyRetired marks a queue the spec retires (spec.Retired): a NoOp
	// that keeps it while it may hold messages, or a Delete once it is
	// empty, which apply guards with if-empty whatever was allowed.
	// Apply records it as the spec's own either way.
	WhyRetired
)

// Plan is the ordered set of changes for one or more vhosts: plain data,
// whose JSON package planjson defines.
type Plan struct {
	Changes []Change
	// PolicyConflicts are the user and operator policies that shadow, are
	// shadowed by, or cap rmqtopo's policies after the plan; see Check.
	PolicyConflicts []PolicyConflict
	// RabbitMQ is the RabbitMQ version the plan is judged for, which every
	// version check of Check reads (see JudgeVersion); nil: the version of
	// Check's State, if any.
	RabbitMQ *Judged
}

// HasChanges reports whether applying the plan would change anything.
func (p Plan) HasChanges() bool {
	for _, c := range p.Changes {
		if c.Action != NoOp {
			return true
		}
	}
	return false
}

// Claims returns the objects p wants in vhost, each with the digest of the
// attributes it wants (topology.Digest): what the spec's ownership record
// claims, so that no other spec deletes them or wants them otherwise.
func Claims(p Plan, vhost string) map[topology.Address]string {
	out := map[topology.Address]string{}
	for _, c := range p.Changes {
		if c.After == nil || c.Address.Vhost != vhost || c.Address.Kind == topology.KindVhost {
			continue
		}
		out[c.Address] = c.After.digest()
	}
	return out
}

func (o *Object) digest() string {
	switch {
	case o.Exchange != nil:
		return topology.Digest(*o.Exchange)
	case o.Queue != nil:
		return topology.Digest(*o.Queue)
	case o.Policy != nil:
		return topology.Digest(*o.Policy)
	}
	return ""
}
