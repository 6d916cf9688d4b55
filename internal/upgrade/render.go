package upgrade

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Text writes the report for people: one line per verdict, its detail and
// advice, then the route.
func Text(w io.Writer, r Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Upgrade preview of vhost %s: RabbitMQ %s → %s\n", r.Vhost, r.Source, r.Target)
	if len(r.Verdicts) == 0 {
		b.WriteString("\nNothing the target refuses, ignores or does differently.\n")
	} else {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CODE\tSEVERITY\tEFFECT\tOBJECT\tVALUE")
		for _, v := range r.Verdicts {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\n", v.Code, v.Severity, v.Effect, v.Kind, v.Name, value(v))
		}
		tw.Flush()
		b.WriteString("\n")
		for _, v := range r.Verdicts {
			fmt.Fprintf(&b, "%s %s %s: %s\n  advice: %s\n", v.Code, v.Kind, v.Name, v.Detail, v.Advice)
		}
	}
	fmt.Fprintf(&b, "\n%d error(s), %d warning(s)\n", r.Errors(), len(r.Verdicts)-r.Errors())
	fmt.Fprintf(&b, "Route: %s", r.Route.Kind)
	if len(r.Route.Hops) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(r.Route.Hops, ", "))
	}
	b.WriteString("\n")
	for _, why := range r.Route.Why {
		fmt.Fprintf(&b, "  - %s\n", why)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func value(v Verdict) string {
	switch {
	case v.Key == "":
		return "-"
	case v.Value == nil:
		return v.Key + " (not set)"
	}
	return fmt.Sprintf("%s=%v", v.Key, v.Value)
}

// JSON writes the report as one JSON document (docs/upgrades.md).
func JSON(w io.Writer, r Report) error {
	if r.Verdicts == nil {
		r.Verdicts = []Verdict{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
