// Package failpoint holds the one test hook of rmqtopo's CLI: a SIGKILL
// at a named step, which the tests use to check that an apply or a
// migration killed anywhere is finished by the next apply. Release builds
// have no hook (off.go); only binaries built with -tags rmqtopo_testhooks
// honour the environment variable Env (on.go).
package failpoint

// Env names the environment variable of the failpoint: "STEP" or
// "STEP:N", where STEP is a migration step (killed once N messages moved)
// or "changes" (killed once N changes are made).
const Env = "RMQTOPO_TEST_MIGRATE_KILL_AT"
