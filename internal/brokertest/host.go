package brokertest

// What a node needs of the host: processes, free ports, and Debian's
// packages installed when missing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie still answers signal 0; it is not a running node.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func dialable(p int) bool {
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// handedOut holds every port freePorts has picked in this process: a port
// is never picked twice, so nodes started side by side (a cluster, the TLS
// node) cannot pick each other's before they listen on them.
var (
	handedOutMu sync.Mutex
	handedOut   = map[int]bool{}
)

// freePorts returns the given ports, replacing each 0 with a distinct free
// port, not picked before by this process, that is not one of the system
// broker's.
func freePorts(want ...int) ([]int, error) {
	handedOutMu.Lock()
	defer handedOutMu.Unlock()
	out := make([]int, len(want))
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for i, p := range want {
		if p != 0 {
			out[i] = p
			continue
		}
		for tries := 0; ; tries++ {
			// Below the ephemeral range: a port the kernel hands out
			// for :0 is also one it may give an outgoing connection
			// (another test's, the cluster's) between this pick and
			// the node's start, which then fails "port in use".
			port := 20000 + mrand.IntN(ephemeralLow()-20000)
			if !handedOut[port] && !isReserved(port) {
				if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
					held = append(held, l)
					handedOut[port] = true
					out[i] = port
					break
				}
			}
			if tries > 200 {
				return nil, errors.New("brokertest: could not pick a free port")
			}
		}
	}
	return out, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// net.ipv4.ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(string(data), &low, &high); err != nil || low <= 21000 {
		return 32768
	}
	return low
}

var installMu sync.Mutex

// ensureInstalled installs Debian's rabbitmq-server when its scripts are
// missing and we are root. The package's postinst may start a system broker
// on 5672; private nodes do not use it.
func ensureInstalled(ctx context.Context, binDir string) error {
	server := filepath.Join(binDir, "rabbitmq-server")
	if _, err := os.Stat(server); err == nil {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if _, err := os.Stat(server); err == nil {
		return nil
	}
	if os.Geteuid() != 0 || binDir != DefaultBinDir {
		return fmt.Errorf("brokertest: %s not found. Install RabbitMQ (Debian/Ubuntu: apt-get install rabbitmq-server; "+
			"or set RMQTOPO_RABBITMQ_BIN_DIR to a directory holding rabbitmq-server and rabbitmqctl), "+
			"or point the tests at a running broker with management plugin: "+
			"RMQTOPO_TEST_URL=http://HOST:15672 RMQTOPO_TEST_AMQP_URL=amqp://USER:PASS@HOST:5672/", server)
	}
	if err := installDebian(ctx, "rabbitmq-server", func() bool { _, err := os.Stat(server); return err == nil }); err != nil {
		return err
	}
	if _, err := os.Stat(server); err != nil {
		return fmt.Errorf("brokertest: rabbitmq-server installed but %s is missing: %w", server, err)
	}
	return nil
}

// EnsureDebianPackage installs Debian's pkg with apt-get unless have
// reports it there already, for the tests that run a real client of
// another language (make test installs what it needs). Only root can; the
// error says so, and the test may then skip.
func EnsureDebianPackage(ctx context.Context, pkg string, have func() bool) error {
	if have() {
		return nil
	}
	installMu.Lock()
	defer installMu.Unlock()
	if os.Geteuid() != 0 {
		return fmt.Errorf("brokertest: Debian's %s is missing, and only root installs it (apt-get install %s)", pkg, pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("brokertest: %s is missing and there is no apt-get to install it: %w", pkg, err)
	}
	return installDebian(ctx, pkg, have)
}

// installDebian installs pkg with apt-get, unless have holds once it holds
// a lock shared with other test binaries installing at the same time. It
// tries the package lists as they are first, and updates them only if
// that fails.
func installDebian(ctx context.Context, pkg string, have func() bool) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "rmqtopo-brokertest-install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if have() {
		return nil
	}
	apt := func(args ...string) error {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("brokertest: apt-get %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
		return nil
	}
	if apt("install", "-y", pkg) == nil {
		return nil
	}
	if err := apt("update"); err != nil {
		return err
	}
	return apt("install", "-y", pkg)
}

// firstLine is err's message up to its first newline.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

func lastLines(s string, n int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
