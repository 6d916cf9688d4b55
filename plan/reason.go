package plan

import (
	"fmt"
	"strings"

	"github.com/rmqtopo/rmqtopo/internal/english"
	"github.com/rmqtopo/rmqtopo/topology"
)

// ReasonKind is what a Reason says about a change: data code may branch
// on, where the sentence a plan shows is only its rendering.
type ReasonKind uint8

const (
	// ReasonText is a sentence without a kind: a reason read back from a
	// saved plan's JSON, which carries only the sentence.
	ReasonText ReasonKind = iota
	// ReasonNotInSpec: the object left the spec.
	ReasonNotInSpec
	// ReasonImmutable: Subject ("queue argument x-message-ttl") cannot
	// change in place, from Was to Want.
	ReasonImmutable
	// ReasonChanged: Subject of a policy changes in place, from Was to Want.
	ReasonChanged
	// ReasonArgumentStays: queue argument Subject, Was on the queue, beats
	// or caps its policy (Text says which rule), so only a replace gives
	// the queue Want (the policy key and value), or removes the argument
	// when Want is empty (the spec gives the key no value).
	ReasonArgumentStays
	// ReasonRecreated: a binding re-created because its endpoint Subject
	// (e.g. `queue "orders"`) is replaced.
	ReasonRecreated
	// ReasonRetiredEmpty: a retired wait queue that is empty.
	ReasonRetiredEmpty
	// ReasonRetiredDraining: a retired wait queue still holding Count
	// messages.
	ReasonRetiredDraining
	// ReasonRetiredUnknown: a retired wait queue whose count is unknown.
	ReasonRetiredUnknown
	// ReasonLeftBehind: an owned queue that left the spec, kept because the
	// plan does not prune.
	ReasonLeftBehind
	// ReasonLegacy: a queue kept in an earlier rmqtopo's shape (legacy.go).
	ReasonLegacy
	// ReasonAdopted: a queue kept with arguments its policy now also sets;
	// Text says what stays (pinnedText).
	ReasonAdopted
	// ReasonResumes: a migration in progress through queue Subject resumes.
	ReasonResumes
	// ReasonMigrated: a replace made a migration.
	ReasonMigrated
	// ReasonNotMigratable: a replace the user chose to migrate that cannot
	// be; Text says why.
	ReasonNotMigratable
	// ReasonLadderDraining: an object of retired delay ladder Subject, kept
	// while its level queues drain.
	ReasonLadderDraining
	// ReasonMigrationOrphan: the temporary queue of a migration of queue
	// Subject, which left the spec.
	ReasonMigrationOrphan
	// ReasonRetired: a queue the spec retires, kept; Count messages when
	// Want is "counted", its count unknown otherwise; Text is set when
	// the plan prunes (it is kept for holding messages).
	ReasonRetired
	// ReasonRetiredGone: a retired queue, empty, deleted.
	ReasonRetiredGone
	// ReasonNativeInArguments: a native queue kept in the shape of an
	// earlier rmqtopo, its schedule in its arguments (nativefold.go).
	ReasonNativeInArguments
)

// Reason is one part of why a change is what it is. Its fields beyond
// Kind are the values its sentence names; which ones a kind uses is said
// at the kind.
type Reason struct {
	Kind    ReasonKind
	Subject string
	Was     string
	Want    string
	Text    string
	Count   int64
}

// String is the sentence a plan shows for r.
func (r Reason) String() string {
	switch r.Kind {
	case ReasonNotInSpec:
		return "not in spec"
	case ReasonImmutable:
		return fmt.Sprintf("%s is immutable (%s → %s)", r.Subject, r.Was, r.Want)
	case ReasonChanged:
		return fmt.Sprintf("%s changed (%s → %s)", r.Subject, r.Was, r.Want)
	case ReasonArgumentStays:
		if r.Want == "" {
			pk, _ := topology.PolicyKey(r.Subject)
			return fmt.Sprintf("queue argument %s %s stays on the queue (%s): the spec gives no %s, and only a replace removes the argument", r.Subject, r.Was, r.Text, pk)
		}
		return fmt.Sprintf("queue argument %s %s stays on the queue (%s): only a replace gives it %s", r.Subject, r.Was, r.Text, r.Want)
	case ReasonRecreated:
		return "re-created after replace of " + r.Subject
	case ReasonRetiredEmpty:
		return "retired wait queue, empty"
	case ReasonRetiredDraining:
		return fmt.Sprintf("retired wait queue draining: %s waiting; deleted by a later apply once empty", english.Count(r.Count, "message", "messages"))
	case ReasonRetiredUnknown:
		return "retired wait queue, message count unknown; deleted by a later apply once known to be empty"
	case ReasonLeftBehind:
		return "left the spec; kept because the plan does not prune"
	case ReasonLegacy:
		return "kept: what it was not declared with (dead-lettering, the default delivery limit) is in its policy, as an earlier rmqtopo made it"
	case ReasonAdopted:
		return "adopted: " + r.Text
	case ReasonResumes:
		return fmt.Sprintf("resumes the migration in progress through queue %q", r.Subject)
	case ReasonMigrated:
		return "migrated: its messages are moved out and back with confirms"
	case ReasonNotMigratable:
		return r.Text
	case ReasonLadderDraining:
		return fmt.Sprintf("kept with retired delay ladder %s while its level queues drain; deleted by a later apply once they are empty", r.Subject)
	case ReasonNativeInArguments:
		return "native queue made by an earlier rmqtopo, its schedule in its arguments: a schedule change replaces it; with migrate: true that change migrates it to the in-place shape, where later schedule changes touch no message"
	case ReasonRetired:
		held := "its message count unknown"
		if r.Want == "counted" {
			held = "it holds " + english.Count(r.Count, "message", "messages")
		}
		return "retired: a pruning apply deletes it once empty (" + held + ")"
	case ReasonRetiredGone:
		return "retired, empty"
	case ReasonMigrationOrphan:
		return fmt.Sprintf("temporary queue of a migration of queue %q, which is not in the spec; left as it is", r.Subject)
	}
	return r.Text
}

// reasonsText is the sentence of a change with reasons rs, as its
// "reason" field in JSON shows it.
func reasonsText(rs []Reason) string {
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return rs[0].String()
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, "; ")
}
