package planjson

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// FormatVersion is the one version of the JSON of a plan: the document
// `plan --format json` writes and the saved plan `plan --out` writes,
// which says it twice (the file's and its plan's format_version, as
// version 1 wrote them). Bump it on any incompatible change to either.
const FormatVersion = 1

// Document is the JSON plan (docs/plan-json.md) as data, which `plan
// --format json` writes and the text and Markdown plans are drawn from.
// Its JSON is documentJSON.
type Document struct {
	// RabbitMQ is the version the plan was judged for; nil for plans
	// that were never checked against one.
	RabbitMQ    *plan.Judged
	Changes     []plan.Change
	Diagnostics []plan.Diagnostic
	Summary     plan.ActionCounts
}

// documentJSON is the shape of the JSON plan: the one definition of it.
// Write streams it a change at a time, field by field as declared here,
// and a test holds the stream to encoding/json's bytes for the whole.
type documentJSON struct {
	FormatVersion int          `json:"format_version"`
	RabbitMQ      *Judged      `json:"rabbitmq,omitempty"`
	Changes       []Change     `json:"changes"`
	Diagnostics   []Diagnostic `json:"diagnostics"`
	Summary       ActionCounts `json:"summary"`
}

// head is doc's documentJSON but for its changes, which Write writes one
// at a time.
func head(doc Document) documentJSON {
	return documentJSON{FormatVersion: FormatVersion, RabbitMQ: (*Judged)(doc.RabbitMQ),
		Diagnostics: diagnosticsJSON(doc.Diagnostics), Summary: ActionCounts(doc.Summary)}
}

// NewDocument is the Document of plan p with diagnostics diags. No-ops
// are only counted: they are the unchanged part of the broker, and
// anything worth knowing about one (a draining wait queue) is a
// diagnostic.
func NewDocument(p plan.Plan, diags []plan.Diagnostic) Document {
	doc := Document{
		RabbitMQ:    p.RabbitMQ,
		Changes:     []plan.Change{},
		Diagnostics: append([]plan.Diagnostic{}, diags...),
		Summary:     p.CountActions(),
	}
	n := 0
	for _, c := range p.Changes {
		if c.Action != plan.NoOp {
			n++
		}
	}
	switch {
	case n == len(p.Changes) && n > 0:
		doc.Changes = p.Changes // nothing to leave out: no copy of the plan
	case n > 0:
		doc.Changes = make([]plan.Change, 0, n)
		for _, c := range p.Changes {
			if c.Action != plan.NoOp {
				doc.Changes = append(doc.Changes, c)
			}
		}
	}
	return doc
}

// HasChanges reports whether the document lists a change.
func (d Document) HasChanges() bool { return len(d.Changes) > 0 }

// MarshalJSON writes d as Write streams it, compacted.
func (d Document) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := Write(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalJSON reads a JSON plan of this FormatVersion.
func (d *Document) UnmarshalJSON(b []byte) error {
	var j documentJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.FormatVersion != FormatVersion {
		return fmt.Errorf("plan format %d; this rmqtopo reads %d", j.FormatVersion, FormatVersion)
	}
	*d = Document{RabbitMQ: (*plan.Judged)(j.RabbitMQ), Changes: planChanges(j.Changes),
		Diagnostics: planDiagnostics(j.Diagnostics), Summary: plan.ActionCounts(j.Summary)}
	return nil
}

// Change is a plan.Change as JSON shows it (docs/plan-json.md): the
// fields of its Details in place, its Reasons as one sentence, and its
// Why as the boolean of its name, in the order they had when they were
// booleans of Details.
type Change struct {
	Action     plan.Action      `json:"action"`
	Address    topology.Address `json:"address"`
	Before     *Object          `json:"before,omitempty"`
	After      *Object          `json:"after,omitempty"`
	Reason     string           `json:"reason,omitempty"`
	Messages   *int64           `json:"messages,omitempty"`
	Consumers  *int64           `json:"consumers,omitempty"`
	Resumes    bool             `json:"resumes,omitempty"`
	Owner      string           `json:"owner,omitempty"`
	MayDelete  bool             `json:"may_delete,omitempty"`
	Conflict   []string         `json:"conflict,omitempty"`
	LeftBehind bool             `json:"left_behind,omitempty"`
	Draining   bool             `json:"draining,omitempty"`
	Retired    bool             `json:"retired,omitempty"`
	Pinned     []string         `json:"pinned,omitempty"`
	InPolicy   []string         `json:"in_policy,omitempty"`
	WaitFor    []string         `json:"wait_for,omitempty"`
}

// ChangeOf is c as JSON shows it.
func ChangeOf(c plan.Change) Change {
	j := Change{Action: c.Action, Address: c.Address, Before: (*Object)(c.Before), After: (*Object)(c.After)}
	if d := c.Details; d != nil {
		j.Reason, j.Messages, j.Consumers, j.Owner = c.Reason(), d.Messages, d.Consumers, d.Owner
		j.Conflict, j.Pinned, j.InPolicy, j.WaitFor = d.Conflict, d.Pinned, d.InPolicy, d.WaitFor
		j.Resumes, j.MayDelete = d.Why == plan.WhyResumes, d.Why == plan.WhyMayDelete
		j.LeftBehind, j.Draining, j.Retired = d.Why == plan.WhyLeftBehind, d.Why == plan.WhyDraining, d.Why == plan.WhyRetired
	}
	return j
}

// Plan is the plan.Change j shows. A change without details reads as it
// was written: without Details. Its reason comes back as the one
// sentence a saved plan carries.
func (j Change) Plan() plan.Change {
	c := plan.Change{Action: j.Action, Address: j.Address, Before: (*plan.Object)(j.Before), After: (*plan.Object)(j.After)}
	det := plan.Details{Messages: j.Messages, Consumers: j.Consumers, Owner: j.Owner,
		Conflict: j.Conflict, Pinned: j.Pinned, InPolicy: j.InPolicy, WaitFor: j.WaitFor}
	if j.Reason != "" {
		det.Reasons = []plan.Reason{{Kind: plan.ReasonText, Text: j.Reason}}
	}
	for _, w := range []struct {
		set bool
		why plan.Why
	}{{j.Resumes, plan.WhyResumes}, {j.MayDelete, plan.WhyMayDelete}, {j.LeftBehind, plan.WhyLeftBehind}, {j.Draining, plan.WhyDraining}, {j.Retired, plan.WhyRetired}} {
		if w.set {
			det.Why = w.why
		}
	}
	if det.Why != plan.WhyNone || det.Reasons != nil || det.Messages != nil || det.Consumers != nil || det.Owner != "" ||
		det.Conflict != nil || det.Pinned != nil || det.InPolicy != nil || det.WaitFor != nil {
		c.Details = &det
	}
	return c
}

func jsonChanges(cs []plan.Change) []Change {
	out := make([]Change, len(cs))
	for i := range cs {
		out[i] = ChangeOf(cs[i])
	}
	return out
}

func planChanges(js []Change) []plan.Change {
	if js == nil {
		return nil
	}
	out := make([]plan.Change, len(js))
	for i := range js {
		out[i] = js[i].Plan()
	}
	return out
}
