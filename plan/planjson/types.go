package planjson

import (
	"github.com/rmqtopo/rmqtopo/plan"
	"github.com/rmqtopo/rmqtopo/topology"
)

// The plan's parts as JSON shows them. Each has the fields of the plan
// type of its name, in its order, so that one converts to the other in
// place ((*Object)(o)); only the tags are this package's. Objects'
// contents (topology's exchanges, queues, bindings, policies, addresses)
// are the model's own JSON, shared with the definitions.

// Object is a plan.Object: exactly one field is set, matching the
// change's address kind; a vhost has none.
type Object struct {
	Exchange *topology.Exchange `json:"exchange,omitempty"`
	Queue    *topology.Queue    `json:"queue,omitempty"`
	Binding  *topology.Binding  `json:"binding,omitempty"`
	Policy   *topology.Policy   `json:"policy,omitempty"`
}

// Diagnostic is a plan.Diagnostic. Its Remedy is not shown: the CLI
// words it into Message before anything shows or saves it.
type Diagnostic struct {
	Code     string           `json:"code"`
	Severity plan.Severity    `json:"severity"`
	Address  topology.Address `json:"address"`
	Message  string           `json:"message"`
	Messages int64            `json:"messages,omitempty"`
	Remedy   plan.Remedy      `json:"-"`
}

// ActionCounts is a plan.ActionCounts: the JSON plan's "summary".
type ActionCounts struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	NoOp    int `json:"no_op"`
	Migrate int `json:"migrate,omitempty"`
}

// Judged is a plan.Judged: the version a plan was judged for, and where
// it came from.
type Judged struct {
	Version string `json:"version,omitempty"`
	From    string `json:"from"`
}

// PolicyConflict is a plan.PolicyConflict, as a saved plan keeps it.
type PolicyConflict struct {
	Kind      string            `json:"kind"`
	Policy    string            `json:"policy"`
	Vhost     string            `json:"vhost"`
	Priority  int64             `json:"priority"`
	Queues    []string          `json:"queues,omitempty"`
	Exchanges []string          `json:"exchanges,omitempty"`
	Keys      []string          `json:"keys"`
	Capped    map[string][2]any `json:"capped,omitempty"`
}

// convert converts each of in, keeping nil nil and empty empty (an empty
// list is written [], a nil one null or not at all).
func convert[From, To any](in []From, conv func(From) To) []To {
	if in == nil {
		return nil
	}
	out := make([]To, len(in))
	for i, v := range in {
		out[i] = conv(v)
	}
	return out
}

func diagnosticsJSON(ds []plan.Diagnostic) []Diagnostic {
	return convert(ds, func(d plan.Diagnostic) Diagnostic { return Diagnostic(d) })
}

func planDiagnostics(ds []Diagnostic) []plan.Diagnostic {
	return convert(ds, func(d Diagnostic) plan.Diagnostic { return plan.Diagnostic(d) })
}

func conflictsJSON(cs []plan.PolicyConflict) []PolicyConflict {
	return convert(cs, func(c plan.PolicyConflict) PolicyConflict { return PolicyConflict(c) })
}

func planConflicts(cs []PolicyConflict) []plan.PolicyConflict {
	return convert(cs, func(c PolicyConflict) plan.PolicyConflict { return plan.PolicyConflict(c) })
}
