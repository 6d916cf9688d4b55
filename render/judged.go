package render

import "github.com/rmqtopo/rmqtopo/plan"

// judgedLine is the plan's header sentence, without its full stop: the
// RabbitMQ version the plan is judged for and where it came from.
// versionFlag is the caller's name for the override of that version (the
// CLI's flag; TextOptions.VersionFlag, MarkdownOptions.VersionFlag): the
// header names it as the source of a version given, and as the remedy for
// an unknown one. Render names no flag of its own, so without one a given
// version is "the version given" and an unknown one has no remedy.
func judgedLine(j plan.Judged, versionFlag string) string {
	if j.Version == "" {
		s := "RabbitMQ version unknown: the checks that depend on it are skipped"
		if versionFlag != "" {
			s += " (give " + versionFlag + ")"
		}
		return s
	}
	var why string
	switch j.From {
	case plan.FromOverride:
		why = versionFlag
		if why == "" {
			why = "the version given"
		}
	case plan.FromBroker:
		why = "the broker's version"
	case plan.FromExport:
		why = "the export's rabbit_version"
	default:
		return "Judged for RabbitMQ " + j.Version
	}
	return "Judged for RabbitMQ " + j.Version + " (" + why + ")"
}
