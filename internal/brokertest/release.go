package brokertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rmqtopo/rmqtopo/internal/waitguard"
	"github.com/rmqtopo/rmqtopo/rabbitmq"
)

// EnvRabbitMQ selects the RabbitMQ release series of the nodes the tests
// start: 3.10, 4.0 or 4.3 (DefaultRelease when unset). `make test
// RABBITMQ=4.0` sets it.
const EnvRabbitMQ = "RMQTOPO_TEST_RABBITMQ"

// EnvRootCache names the directory that keeps the private roots of the 4.x
// releases across runs (default $XDG_CACHE_HOME/rmqtopo/roots, else
// $HOME/.cache/rmqtopo/roots).
const EnvRootCache = "RMQTOPO_ROOT_CACHE"

// DefaultRelease is the series tests run on when EnvRabbitMQ is unset: the
// newest supported.
var DefaultRelease = Releases[len(Releases)-1].Series

// Release is a RabbitMQ release series the harness can start, and where its
// server comes from.
type Release struct {
	// Series is what EnvRabbitMQ names: "3.10", "4.0", "4.3".
	Series string
	// Suite is the Debian suite whose rabbitmq-server package is installed
	// into a private root; "" for the host's own package. Debian 12's
	// 3.10.8 runs on the host; 4.0.5 (trixie) and 4.3.6 (sid) need an
	// Erlang built for glibc 2.38 and so run in a root of their own.
	Suite string
}

// Releases are the series the harness starts, oldest first: the tested
// releases of the release profiles (rabbitmq.TestedReleases), which
// `rabbitnode releases` prints for the Makefile and .ci/run.
var Releases = testedReleases()

func testedReleases() []Release {
	var out []Release
	for _, t := range rabbitmq.TestedReleases() {
		out = append(out, Release{Series: t.Series(), Suite: t.Debian})
	}
	return out
}

// ReleaseFromEnv returns the release EnvRabbitMQ selects.
func ReleaseFromEnv() (Release, error) {
	series := os.Getenv(EnvRabbitMQ)
	if series == "" {
		series = DefaultRelease
	}
	return LookupRelease(series)
}

// LookupRelease returns the release of a series ("4.3"; "host" is the
// host's own package, 3.10 on Debian 12).
func LookupRelease(series string) (Release, error) {
	if series == "host" {
		return Releases[0], nil
	}
	i := slices.IndexFunc(Releases, func(r Release) bool { return r.Series == series })
	if i < 0 {
		var all []string
		for _, r := range Releases {
			all = append(all, r.Series)
		}
		return Release{}, fmt.Errorf("brokertest: %s=%q: no such RabbitMQ series; choose one of %s", EnvRabbitMQ, series, strings.Join(all, ", "))
	}
	return Releases[i], nil
}

// rootCache is the directory holding the private roots.
func rootCache() (string, error) {
	if d := os.Getenv(EnvRootCache); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("brokertest: no cache directory for RabbitMQ roots (%v); set %s", err, EnvRootCache)
	}
	return filepath.Join(d, "rmqtopo", "roots"), nil
}

// rootMarker is written into a root once rabbitmq-server is installed in
// it; a root without it is incomplete and built again.
const rootMarker = ".rmqtopo-root-ready"

// EnsureRoot returns the private root of r, building it once (debootstrap
// of r.Suite, then Debian's rabbitmq-server in it; about 2 minutes) with
// progress lines on progress. It returns "" for a release of the host.
// Roots are built under a lock, so test binaries asking at once build one.
// Where a root cannot be made (not root, no debootstrap, no archive), the
// error says so in its first line and how to use an existing broker.
func EnsureRoot(ctx context.Context, r Release, progress io.Writer) (string, error) {
	if r.Suite == "" {
		return "", nil
	}
	cache, err := rootCache()
	if err != nil {
		return "", err
	}
	root := filepath.Join(cache, "rabbitmq-"+r.Series)
	if ready(root) {
		return root, nil
	}
	if err := canBuildRoots(ctx); err != nil {
		return "", rootErr(r, err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", rootErr(r, err)
	}
	unlock, err := lockFile(filepath.Join(cache, ".lock"))
	if err != nil {
		return "", rootErr(r, err)
	}
	defer unlock()
	if ready(root) {
		return root, nil
	}
	if err := buildRoot(ctx, r, root, progress); err != nil {
		return "", rootErr(r, err)
	}
	return root, nil
}

func ready(root string) bool {
	_, err := os.Stat(filepath.Join(root, rootMarker))
	return err == nil
}

// rootErr is EnsureRoot's one-line failure with the way around it.
func rootErr(r Release, err error) error {
	return fmt.Errorf("brokertest: cannot make a RabbitMQ %s root (Debian %s) here: %v; "+
		"run the tests on the host's RabbitMQ with %s=3.10, or point them at a running %s broker: %s=http://HOST:15672 %s=amqp://USER:PASS@HOST:5672/",
		r.Series, r.Suite, firstLine(err), EnvRabbitMQ, r.Series, EnvMgmtURL, EnvAMQPURL)
}

// canBuildRoots checks what building a root needs: root, unshare and
// chroot, and debootstrap (installed from Debian's packages if missing).
func canBuildRoots(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("building and running a private root needs root (debootstrap, chroot, unshare)")
	}
	for _, c := range []string{"unshare", "chroot", "mount"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("%s is missing: %w", c, err)
		}
	}
	return EnsureDebianPackage(ctx, "debootstrap", func() bool {
		_, err := exec.LookPath("debootstrap")
		return err == nil
	})
}

// buildRoot makes root from scratch in root+".tmp", then renames it, so a
// root that exists is whole.
func buildRoot(ctx context.Context, r Release, root string, progress io.Writer) error {
	began := time.Now()
	tmp := root + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	// A hang guard: debootstrap takes 30-70 s here, the install 15-50 s.
	ctx, cancel := context.WithTimeout(ctx, waitguard.For(2*time.Minute))
	defer cancel()
	step := func(what string) {
		fmt.Fprintf(progress, "brokertest: RabbitMQ %s root (Debian %s, built once, about 2 min): %s [%ds]\n",
			r.Series, r.Suite, what, int(time.Since(began).Seconds()))
	}
	step("debootstrap into " + tmp)
	if err := runLogged(ctx, tmp+".log", "debootstrap", "--variant=minbase", r.Suite, tmp); err != nil {
		return err
	}
	if err := prepareRoot(tmp); err != nil {
		return err
	}
	step("apt-get install rabbitmq-server")
	apt := "apt-get -o Acquire::Check-Valid-Until=false -q"
	script := apt + " update && DEBIAN_FRONTEND=noninteractive " + apt + " install -y --no-install-recommends rabbitmq-server"
	if err := runLogged(ctx, tmp+".log", "unshare", inRoot(tmp, nil, "/bin/sh", "-c", script)...); err != nil {
		return err
	}
	installed, _ := filepath.Glob(filepath.Join(tmp, "usr/lib/rabbitmq/lib/rabbitmq_server-*"))
	if len(installed) == 0 {
		return fmt.Errorf("rabbitmq-server installed, but %s holds no rabbitmq_server-*", filepath.Join(tmp, "usr/lib/rabbitmq/lib"))
	}
	if err := os.WriteFile(filepath.Join(tmp, rootMarker), []byte(filepath.Base(installed[0])+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.Rename(tmp, root); err != nil {
		return err
	}
	os.Remove(tmp + ".log")
	step("ready in " + root)
	return nil
}

// prepareRoot keeps services from starting during the install
// (policy-rc.d) and gives the root the host's /etc/hosts: without it a node
// stops at boot with "epmd error for host localhost: nxdomain".
func prepareRoot(root string) error {
	if err := os.WriteFile(filepath.Join(root, "usr/sbin/policy-rc.d"), []byte("#!/bin/sh\nexit 101\n"), 0o755); err != nil {
		return err
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, "etc/hosts"), hosts, 0o644)
}

// inRoot is the argument list of unshare that runs argv chrooted in root,
// in a mount namespace of its own with /proc, /dev and each of binds (host
// directories, at the same path inside) mounted: the mounts vanish with the
// last process of the namespace, so none outlives the node.
func inRoot(root string, binds []string, argv ...string) []string {
	script := `set -e; r="$1"; shift; n="$1"; shift
mount -t proc proc "$r/proc"; mount --bind /dev "$r/dev"
while [ "$n" -gt 0 ]; do mkdir -p "$r$1"; mount --bind "$1" "$r$1"; shift; n=$((n-1)); done
exec chroot "$r" "$@"`
	args := []string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "brokertest-root", root, fmt.Sprint(len(binds))}
	args = append(args, binds...)
	return append(args, argv...)
}

// runLogged runs a command with its output in logPath, and on failure
// returns the log's last lines.
func runLogged(ctx context.Context, logPath, name string, args ...string) error {
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s failed (%w); its log %s ends:\n%s", name, err, logPath, tailFile(logPath, 10))
	}
	return nil
}

// lockFile takes an exclusive flock on path and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
