package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rmqtopo/rmqtopo/internal/exitcode"
	"github.com/rmqtopo/rmqtopo/internal/upgrade"
	"github.com/rmqtopo/rmqtopo/internal/upgrade/live"
)

// upgradeCmd groups the commands of a move to another RabbitMQ release,
// listed in a group of their own as dlqCmd's are (their longer names
// would widen the main column).
type upgradeCmd struct {
	Preview upgradePreviewCmd `cmd:"" group:"Upgrades:" help:"Judge a live vhost against a target RabbitMQ release: what it refuses, ignores or does differently, and the route there."`
	Move    upgradeMoveCmd    `cmd:"" group:"Upgrades:" help:"Move every message of the specs' queues from the old (blue) broker to the new (green) one, retries at their time and attempt."`
}

type upgradePreviewCmd struct {
	Files            []string  `arg:"" optional:"" name:"FILE" help:"Spec files: judge their vhosts (all of each vhost, not only the spec's objects)."`
	To               string    `name:"to" required:"" placeholder:"RELEASE" help:"The target release: MAJOR.MINOR.PATCH, or a series (4.0, 4.3) for its newest patch rmqtopo knows (4.0.5, 4.3.6)."`
	Vhost            string    `name:"vhost" help:"The vhost to judge when no spec file is given." default:"/"`
	Format           string    `short:"f" help:"Output format: text or json." enum:"text,json" default:"text"`
	DetailedExitCode bool      `name:"detailed-exitcode" help:"Exit 9 when the target only ignores or changes something (warnings); refusals exit 8 with or without it."`
	Conn             connFlags `embed:""`
}

// Run reads each vhost, judges it and renders the reports; refusals exit
// exitcode.UpgradeRefused, warnings exitcode.UpgradeWarnings with
// --detailed-exitcode.
func (c *upgradePreviewCmd) Run(e *env) error {
	target, err := upgrade.Target(c.To)
	if err != nil {
		return input(fmt.Errorf("--to: %w", err))
	}
	vhosts, err := c.vhosts(e)
	if err != nil {
		return err
	}
	client, err := c.Conn.client(e)
	if err != nil {
		return err
	}
	var reports []upgrade.Report
	for _, v := range vhosts {
		snap, err := live.Read(e.ctx, client, v)
		if err != nil {
			return err
		}
		reports = append(reports, upgrade.Judge(snap, target))
	}
	for _, r := range reports {
		if c.Format == "json" {
			err = upgrade.JSON(e.stdout, r)
		} else {
			err = upgrade.Text(e.stdout, r)
		}
		if err != nil {
			return err
		}
	}
	return previewExit(reports, c.DetailedExitCode)
}

func (c *upgradePreviewCmd) vhosts(e *env) ([]string, error) {
	if len(c.Files) == 0 {
		return []string{c.Vhost}, nil
	}
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		if !slices.Contains(out, f.Spec.Vhost) {
			out = append(out, f.Spec.Vhost)
		}
	}
	return out, nil
}

func previewExit(reports []upgrade.Report, detailed bool) error {
	warnings := false
	for _, r := range reports {
		if r.Errors() > 0 {
			return &ExitError{Code: exitcode.UpgradeRefused, Err: errors.New("the target release refuses what the vhost holds (see the error verdicts)")}
		}
		warnings = warnings || len(r.Verdicts) > 0
	}
	if detailed && warnings {
		return &ExitError{Code: exitcode.UpgradeWarnings}
	}
	return nil
}
