//go:build !rmqtopo_testhooks

package main

// killAt is the failpoint hook; release builds have none, so no test hook
// can kill a production apply (testhooks.go has the one the tests build).
func killAt() func(step string, moved int) { return func(string, int) {} }
