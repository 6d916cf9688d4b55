package main

import "errors"

// statusCmd and dlqCmd are filled in by the operations work; they exist so
// the command tree is complete from the start.
type statusCmd struct{}

func (c *statusCmd) Run(e *env) error { return errors.New("status: not implemented yet") }

type dlqCmd struct{}

func (c *dlqCmd) Run(e *env) error { return errors.New("dlq: not implemented yet") }
