// Package render turns specs, topologies and plans into the text people and
// tools read: RabbitMQ definitions JSON, Mermaid and Graphviz diagrams,
// retry schedules, Messaging Topology Operator objects and Terraform HCL,
// plans as text, JSON and Markdown, and the views of `rmqtopo status` and
// the dlq commands as text and JSON.
//
// Rendering is pure: it never talks to a broker, so everything here works in
// a pull-request job without credentials, and every output is golden-filed.
package render

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/contract"
	"github.com/rmqtopo/rmqtopo/internal/definitions"
	"github.com/rmqtopo/rmqtopo/topology"
)

// Definitions writes t as RabbitMQ definitions JSON, importable with
// `rabbitmqctl import_definitions`.
func Definitions(w io.Writer, t topology.Topology) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(definitions.FromTopology(t))
}

// HumanDuration renders a duration compactly for tables: "0s", "1500ms",
// "2m30s", "1h", "8m20s".
func HumanDuration(d time.Duration) string {
	if d%time.Second != 0 {
		return contract.FormatDelay(d)
	}
	s := d.String()
	// time.Duration prints 5m0s and 1h0m0s; drop the zero trailing units.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
