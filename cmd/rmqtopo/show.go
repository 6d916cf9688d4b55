package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rmqtopo/rmqtopo/plan/planjson"
)

type showCmd struct {
	File   string `arg:"" name:"PLANFILE" help:"A plan saved with 'rmqtopo plan --out'."`
	Format string `short:"f" help:"Output format: text, json or markdown." enum:"text,json,markdown" default:"text"`
}

// Run shows a saved plan again, offline, exactly as plan showed it: the
// same changes and diagnostics through the same renderers. Where it came
// from goes to stderr, so that stdout is the plan alone (a pull-request
// comment, a JSON artifact).
func (c *showCmd) Run(e *env) error {
	saved, err := planjson.Read(c.File)
	if err != nil {
		return planfileError(err)
	}
	if saved == nil {
		return fmt.Errorf("%s is not a plan saved by 'rmqtopo plan --out'", c.File)
	}
	prune := ""
	if saved.Prune {
		prune = ", with --prune"
	}
	fmt.Fprintf(e.stderr, "Plan saved %s against %s (vhosts %s)%s; apply it with: rmqtopo apply %s\n",
		saved.CreatedAt.Format(time.RFC3339), saved.Broker, quoteList(saved.Vhosts), prune, c.File)
	return renderPlan(e, c.Format, saved.Plan, saved.Diagnostics)
}

func quoteList(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = strconv.Quote(s)
	}
	return strings.Join(quoted, ", ")
}
