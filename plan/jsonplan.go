package plan

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/rmqtopo/rmqtopo/topology"
)

// Document is the JSON plan (docs/plan-json.md), which `plan --format
// json` writes and the text and Markdown plans are drawn from: the one
// definition of its shape. Each change is written as its ChangeJSON.
// render.PlanJSON streams it a change at a time, field by field as this
// type declares them, and a test holds the stream to encoding/json's
// bytes for the whole Document.
type Document struct {
	FormatVersion int `json:"format_version"`
	// RabbitMQ is the version the plan was judged for; absent from plans
	// that were never checked against one.
	RabbitMQ    *Judged      `json:"rabbitmq,omitempty"`
	Changes     []Change     `json:"changes"`
	Diagnostics []Diagnostic `json:"diagnostics"`
	Summary     ActionCounts `json:"summary"`
}

// NewDocument is the Document of plan p with diagnostics diags. No-ops
// are only counted: they are the unchanged part of the broker, and
// anything worth knowing about one (a draining wait queue) is a
// diagnostic.
func NewDocument(p Plan, diags []Diagnostic) Document {
	doc := Document{
		FormatVersion: FormatVersion,
		RabbitMQ:      p.RabbitMQ,
		Changes:       []Change{},
		Diagnostics:   append([]Diagnostic{}, diags...),
		Summary:       p.CountActions(),
	}
	n := 0
	for _, c := range p.Changes {
		if c.Action != NoOp {
			n++
		}
	}
	switch {
	case n == len(p.Changes) && n > 0:
		doc.Changes = p.Changes // nothing to leave out: no copy of the plan
	case n > 0:
		doc.Changes = make([]Change, 0, n)
		for _, c := range p.Changes {
			if c.Action != NoOp {
				doc.Changes = append(doc.Changes, c)
			}
		}
	}
	return doc
}

// HasChanges reports whether the document lists a change.
func (d Document) HasChanges() bool { return len(d.Changes) > 0 }

// ChangeJSON is a Change as JSON shows it (docs/plan-json.md): the fields
// of its Details in place, its Reasons as one sentence, and its Why as the
// boolean of its name, in the order they had when they were booleans of
// Details.
type ChangeJSON struct {
	Action     Action           `json:"action"`
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

// jsonEncoders reuse a buffer and an encoder per change written, rather
// than make one for each.
var jsonEncoders = sync.Pool{New: func() any {
	e := &changeEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	// The caller's encoder escapes HTML, or not, as it was told to, when
	// it copies these bytes; escaping here would decide for it.
	e.enc.SetEscapeHTML(false)
	return e
}}

type changeEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// JSON returns c as JSON shows it. Where many changes are written,
// encoding what it returns costs half of encoding c: MarshalJSON's bytes
// are parsed again by the encoder that called it.
func (c Change) JSON() ChangeJSON {
	j := ChangeJSON{Action: c.Action, Address: c.Address, Before: c.Before, After: c.After}
	if d := c.Details; d != nil {
		j.Reason, j.Messages, j.Consumers, j.Owner = reasonsText(d.Reasons), d.Messages, d.Consumers, d.Owner
		j.Conflict, j.Pinned, j.InPolicy, j.WaitFor = d.Conflict, d.Pinned, d.InPolicy, d.WaitFor
		j.Resumes, j.MayDelete = d.Why == WhyResumes, d.Why == WhyMayDelete
		j.LeftBehind, j.Draining, j.Retired = d.Why == WhyLeftBehind, d.Why == WhyDraining, d.Why == WhyRetired
	}
	return j
}

// MarshalJSON writes c as ChangeJSON.
func (c Change) MarshalJSON() ([]byte, error) {
	j := c.JSON()
	e := jsonEncoders.Get().(*changeEncoder)
	defer jsonEncoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(&j); err != nil {
		return nil, err
	}
	return bytes.Clone(bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))), nil
}

// jsonDecoders reuse a decoder per change read, for the same reason.
var jsonDecoders = sync.Pool{New: func() any {
	d := &changeDecoder{}
	d.dec = json.NewDecoder(&d.r)
	d.dec.UseNumber()
	return d
}}

type changeDecoder struct {
	r   bytes.Reader
	dec *json.Decoder
}

// UnmarshalJSON reads ChangeJSON. Numbers in arguments come back as
// json.Number, as planfile's decoder reads them, for it to normalise.
func (c *Change) UnmarshalJSON(data []byte) error {
	var j ChangeJSON
	d := jsonDecoders.Get().(*changeDecoder)
	d.r.Reset(data)
	if err := d.dec.Decode(&j); err != nil {
		return err // d is dropped: a decoder that failed stays failed
	}
	jsonDecoders.Put(d)
	*c = Change{Action: j.Action, Address: j.Address, Before: j.Before, After: j.After}
	det := Details{Reasons: reasonsOf(j.Reason), Messages: j.Messages, Consumers: j.Consumers, Owner: j.Owner,
		Conflict: j.Conflict, Pinned: j.Pinned, InPolicy: j.InPolicy, WaitFor: j.WaitFor}
	for _, w := range []struct {
		set bool
		why Why
	}{{j.Resumes, WhyResumes}, {j.MayDelete, WhyMayDelete}, {j.LeftBehind, WhyLeftBehind}, {j.Draining, WhyDraining}, {j.Retired, WhyRetired}} {
		if w.set {
			det.Why = w.why
		}
	}
	// A change without details reads as it was written: without Details.
	if det.Why != WhyNone || det.Reasons != nil || det.Messages != nil || det.Consumers != nil || det.Owner != "" ||
		det.Conflict != nil || det.Pinned != nil || det.InPolicy != nil {
		c.Details = &det
	}
	return nil
}
