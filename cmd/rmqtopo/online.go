package main

import "errors"

// planCmd and applyCmd are filled in by the plan/apply work; they exist so
// the command tree is complete from the start.
type planCmd struct{}

func (c *planCmd) Run(e *env) error { return errors.New("plan: not implemented yet") }

type applyCmd struct{}

func (c *applyCmd) Run(e *env) error { return errors.New("apply: not implemented yet") }
