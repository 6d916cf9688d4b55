package main

import (
	"fmt"
	"time"

	"github.com/rmqtopo/rmqtopo/status"
)

type statusCmd struct {
	Files         []string      `arg:"" name:"FILE" help:"Spec files (one vhost each)."`
	Format        string        `short:"f" help:"Output format: text or json." enum:"text,json" default:"text"`
	ExitCode      bool          `name:"exit-code" help:"Exit 3 when a DLQ of the specs holds messages, else 5 when objects are missing, else 7 when a wait queue's dead-letters are stuck, else 6 on drift (for cron and CI alerts; see docs/exit-codes.md)."`
	HeldMargin    time.Duration `name:"held-margin" default:"30s" help:"With --exit-code, how long to re-read wait queues that hold dead-letters; those that forward none meanwhile are stuck (exit 7). Skipped when a DLQ holds messages or objects are missing (exit 3 or 5 either way). 0 only reports them; else at least --stats-interval."`
	StatsInterval time.Duration `name:"stats-interval" default:"5s" help:"The broker's collect_statistics_interval (RabbitMQ's default is 5s): how often its counts change, so how often --held-margin re-reads them."`
	NoDrift       bool          `name:"no-drift" help:"Do not compare the live topology with the specs (needs no access to definitions)."`
	Conn          connFlags     `embed:""`
}

func (c *statusCmd) Run(e *env) (err error) {
	if c.StatsInterval <= 0 {
		return input(fmt.Errorf("--stats-interval must be positive, got %s", c.StatsInterval))
	}
	if c.HeldMargin < 0 || (c.HeldMargin > 0 && c.HeldMargin < c.StatsInterval) {
		return input(fmt.Errorf("--held-margin must be 0 or at least --stats-interval, %s (a shorter one re-reads the same counts), got %s", c.StatsInterval, c.HeldMargin))
	}
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	client, err := c.Conn.client(e)
	if err != nil {
		return err
	}
	opts := status.Options{Drift: !c.NoDrift, Log: e.stderr,
		Flags: status.Flags{NoDrift: "--no-drift", HeldMargin: "--held-margin"}}
	if c.ExitCode {
		opts.HeldMargin, opts.StatsInterval = c.HeldMargin, c.StatsInterval
	}
	st, err := status.Read(e.ctx, client, files, opts)
	if err != nil {
		return err
	}
	if c.Format == "json" {
		err = status.JSON(e.stdout, st)
	} else {
		err = status.Text(e.stdout, st, e.color)
	}
	if err != nil {
		return err
	}
	if c.ExitCode {
		if code := st.ExitCode(); code != 0 {
			return &ExitError{Code: code}
		}
	}
	return nil
}
