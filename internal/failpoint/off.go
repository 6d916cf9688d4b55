//go:build !rmqtopo_testhooks

package failpoint

// KillAt is the failpoint hook; release builds have none, so no test
// hook can kill a production apply.
func KillAt() func(step string, n int) { return func(string, int) {} }
