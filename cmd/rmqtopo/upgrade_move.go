package main

import (
	"fmt"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/upgrade/bluegreen"
)

// upgradeMoveCmd is `rmqtopo upgrade move`: the move of a blue-green
// upgrade, once the specs were applied on green (see package upgrade).
type upgradeMoveCmd struct {
	Files    []string      `arg:"" name:"FILE" help:"Spec files, applied on green already."`
	Quiet    time.Duration `default:"15s" help:"How long blue's queues of the specs must stay empty before the move is over: at least blue's statistics interval plus a quorum queue's tick (5s each by default)."`
	Poll     time.Duration `default:"1s" help:"How often blue's queues are counted."`
	Prefetch int           `default:"1000" help:"Messages each shovel has in flight, unconfirmed."`
	Blue     connFlags     `embed:"" prefix:"blue-" xorprefix:"blue-" help:"blue"`
	Green    connFlags     `embed:"" prefix:"green-" xorprefix:"green-" help:"green"`
}

func (c *upgradeMoveCmd) Run(e *env) error {
	if c.Blue.URL == "" || c.Green.URL == "" {
		return input(fmt.Errorf("--blue-url and --green-url are both required"))
	}
	if c.Blue.URL == c.Green.URL {
		return input(fmt.Errorf("--blue-url and --green-url name the same broker"))
	}
	if c.Quiet <= 0 || c.Poll <= 0 || c.Prefetch < 1 {
		return input(fmt.Errorf("--quiet and --poll must be positive and --prefetch at least 1"))
	}
	files, err := loadSpecs(e, c.Files)
	if err != nil {
		return err
	}
	blue, err := c.Blue.client(e)
	if err != nil {
		return err
	}
	green, err := c.Green.client(e)
	if err != nil {
		return err
	}
	_, err = bluegreen.Move(e.ctx, bluegreen.Options{Files: files, Blue: blue, Green: green,
		Quiet: c.Quiet, Poll: c.Poll, Prefetch: c.Prefetch, Log: e.stderr})
	return err
}
